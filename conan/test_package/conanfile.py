# conan/test_package/conanfile.py — `conan create` builds and runs this consumer of the package:
# CMakeDeps + CMakeToolchain, find_package(trainkit), a few training steps of the CPU trainer.
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


class TrainkitTestPackage(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def build(self):
        cmake = CMake(self)
        # The test program checks that version.hpp agrees with the packaged version.
        cmake.configure(variables={"TRAINKIT_EXPECTED_VERSION": str(self.dependencies["trainkit"].ref.version)})
        cmake.build()

    def test(self):
        if can_run(self):
            self.run(os.path.join(self.cpp.build.bindir, "test_package"), env="conanrun")
