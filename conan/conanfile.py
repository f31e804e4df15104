# conan/conanfile.py — Conan 2 recipe for trainkit, a header-only library.
#
# The version comes from the top-level VERSION file (the single source CMake and
# include/trainkit/version.hpp follow too). The package holds include/ only; consumers get the
# CMake target trainkit::trainkit through CMakeDeps, with Eigen, Boost (headers), nlohmann_json,
# Threads and, by default, OpenMP. Option `cuda` adds the component trainkit::cuda (cudart +
# cuBLASLt from the system CUDA toolkit); option `tokenizer` adds trainkit::tokenizer (the GPT-2
# tokenizer, which needs utf8proc); option `hf` adds trainkit::hf (safetensors and Hugging Face
# GPT-2 files; the component the CMake package has too, nothing beyond core's requirements);
# option `mpi` adds trainkit::mpi (the MPI gradient reducer, linked against the system's MPI: MPI
# implementations are chosen per cluster, so the recipe finds the one installed rather than
# building one). The bundled GPT-2 vocabulary (vocab/gpt2, OpenAI's files with their licence) is
# packaged as share/trainkit/gpt2 and named by TRAINKIT_GPT2_VOCAB_DIR, the default of
# tokenizer::resolve_vocab_dir, as the CMake package does. Eigen, Boost, nlohmann_json and
# utf8proc are ordinary requirements, so a profile may take them from Conan Center or, as
# conan/profiles/system does, from the system via [platform_requires].
import os

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load, save
from conan.tools.layout import basic_layout


# Included by the CMake config CMakeDeps writes for trainkit (cmake_build_modules): when Eigen or
# Boost come from the system ([platform_requires]) Conan generates no targets for them, so they
# are found here and linked to trainkit::trainkit. When Conan did provide them the targets exist
# already and nothing is searched; linking twice is harmless.
_SYSTEM_DEPS_MODULE = """\
# trainkit-system-deps.cmake — written by conan/conanfile.py; see the comment there.
if(NOT TARGET Eigen3::Eigen)
  find_package(Eigen3 3.4 REQUIRED NO_MODULE)
endif()
if(NOT TARGET Boost::headers)
  find_package(Boost 1.74 REQUIRED)
endif()
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)
endif()
if(TARGET trainkit::trainkit)
  set_property(TARGET trainkit::trainkit APPEND PROPERTY
               INTERFACE_LINK_LIBRARIES Eigen3::Eigen Boost::headers nlohmann_json::nlohmann_json)
endif()
# utf8proc from the system: the same finder trainkit's own CMake package uses.
if(TARGET trainkit::tokenizer AND NOT TARGET utf8proc::utf8proc)
  include("${CMAKE_CURRENT_LIST_DIR}/trainkit-find-utf8proc.cmake")
  if(NOT TARGET trainkit::utf8proc)
    message(FATAL_ERROR "trainkit::tokenizer needs utf8proc (Debian: apt install libutf8proc-dev)")
  endif()
  set_property(TARGET trainkit::tokenizer APPEND PROPERTY INTERFACE_LINK_LIBRARIES trainkit::utf8proc)
endif()
if(TARGET trainkit::hf AND NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)
  set_property(TARGET trainkit::hf APPEND PROPERTY INTERFACE_LINK_LIBRARIES
               nlohmann_json::nlohmann_json)
endif()
# MPI always from the system (Debian: apt install libopenmpi-dev openmpi-bin).
if(TARGET trainkit::mpi)
  if(NOT TARGET MPI::MPI_CXX)
    find_package(MPI COMPONENTS CXX)
    if(NOT MPI_CXX_FOUND)
      message(FATAL_ERROR "trainkit::mpi needs MPI (Debian: apt install libopenmpi-dev openmpi-bin)")
    endif()
  endif()
  set_property(TARGET trainkit::mpi APPEND PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_CXX)
endif()
# The flags trainkit's own CMakeLists gives nvcc (CMake 3.25 does not know nvcc 13's C++20 flag).
if(TARGET trainkit::cuda)
  set_property(TARGET trainkit::cuda APPEND PROPERTY INTERFACE_COMPILE_OPTIONS
    "$<$<COMPILE_LANGUAGE:CUDA>:-std=c++20;--expt-relaxed-constexpr;--extended-lambda>")
endif()
"""
_CMAKE_DIR = os.path.join("lib", "cmake", "trainkit")
_SYSTEM_DEPS_MODULE_PATH = os.path.join(_CMAKE_DIR, "trainkit-system-deps.cmake")
_VOCAB_DIR = os.path.join("share", "trainkit", "gpt2")


def _repo_root(recipe_folder):
    """The repository root when run from a checkout (recipe in conan/), else the export folder."""
    parent = os.path.dirname(recipe_folder)
    if os.path.isfile(os.path.join(parent, "VERSION")):
        return parent
    return recipe_folder


class TrainkitConan(ConanFile):
    name = "trainkit"
    description = ("Header-only C++20/CUDA framework for training GPT-style language models "
                   "from five compile-time policies")
    topics = ("deep-learning", "gpt-2", "training", "header-only", "cuda")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {"cuda": [True, False], "openmp": [True, False], "tokenizer": [True, False],
               "hf": [True, False], "mpi": [True, False]}
    default_options = {"cuda": False, "openmp": True, "tokenizer": False, "hf": False,
                       "mpi": False}
    no_copy_source = True

    def set_version(self):
        self.version = load(self, os.path.join(_repo_root(self.recipe_folder), "VERSION")).strip()

    def export(self):
        # Keep VERSION beside the exported recipe so set_version works from the cache as well.
        copy(self, "VERSION", _repo_root(self.recipe_folder), self.export_folder)

    def export_sources(self):
        root = _repo_root(self.recipe_folder)
        for pattern in ("include/*", "vocab/gpt2/*", "cmake/trainkit-find-utf8proc.cmake", "LICENSE*", "README.md",
                        "CHANGELOG.md"):
            copy(self, pattern, root, self.export_sources_folder)

    def layout(self):
        basic_layout(self, src_folder=".")

    def requirements(self):
        # transitive_headers: trainkit's public headers include Eigen's and Boost's.
        self.requires("eigen/3.4.0", transitive_headers=True)
        self.requires("boost/1.74.0", transitive_headers=True, libs=False)
        self.requires("nlohmann_json/3.11.2", transitive_headers=True)
        if self.options.tokenizer:
            self.requires("utf8proc/2.8.0")

    def validate(self):
        check_min_cppstd(self, 20)
        if self.settings.os == "Windows":
            raise ConanInvalidConfiguration("trainkit uses POSIX mmap and fsync: Linux/macOS only")

    def package_id(self):
        # The same headers serve every setting and option; the options only change
        # package_info(), which runs in the consumer's graph. One binary for all.
        self.info.clear()

    def package(self):
        copy(self, "*", os.path.join(self.source_folder, "include"),
             os.path.join(self.package_folder, "include"))
        copy(self, "LICENSE*", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, "*", os.path.join(self.source_folder, "vocab", "gpt2"),
             os.path.join(self.package_folder, _VOCAB_DIR))
        copy(self, "LICENSE", os.path.join(self.source_folder, "vocab", "gpt2"),
             os.path.join(self.package_folder, "licenses", "gpt2-vocabulary"))
        save(self, os.path.join(self.package_folder, _SYSTEM_DEPS_MODULE_PATH), _SYSTEM_DEPS_MODULE)
        copy(self, "trainkit-find-utf8proc.cmake", os.path.join(self.source_folder, "cmake"),
             os.path.join(self.package_folder, _CMAKE_DIR))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "trainkit")
        self.cpp_info.set_property("cmake_target_name", "trainkit::all")

        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "trainkit::trainkit")
        core.bindirs = []
        core.libdirs = []
        # Same as the CMake target: correctly rounded vector sqrt in Eigen, so AdamW's results do
        # not depend on alignment or thread count (see CMakeLists.txt).
        core.defines = ["EIGEN_FAST_MATH=0",
                        'TRAINKIT_GPT2_VOCAB_DIR="%s"' % os.path.join(self.package_folder, _VOCAB_DIR)]
        core.resdirs = [os.path.join("share", "trainkit")]
        # Component requires on a [platform_requires] package make CMakeDeps fail ("is not a
        # direct dependency", conan-io/conan#17348), so only packages Conan really provides are
        # listed; the build module finds the others on the system.
        for name, component in (("eigen", "eigen::eigen"), ("boost", "boost::headers"),
                                ("nlohmann_json", "nlohmann_json::nlohmann_json")):
            if name in self.dependencies:  # a platform requirement is not listed there
                core.requires.append(component)
        self.cpp_info.set_property("cmake_build_modules", [_SYSTEM_DEPS_MODULE_PATH])
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread"]
        if self.options.openmp:
            # Eigen's GEMMs and the CPU model's loops run in parallel under OpenMP; without the
            # flag the pragmas are ignored and everything runs on one thread (still correct).
            core.cxxflags = ["-fopenmp"]
            core.sharedlinkflags = ["-fopenmp"]
            core.exelinkflags = ["-fopenmp"]

        if self.options.cuda:
            cuda = self.cpp_info.components["cuda"]
            cuda.set_property("cmake_target_name", "trainkit::cuda")
            cuda.requires = ["core"]
            cuda.bindirs = []
            cuda.system_libs = ["cudart", "cublasLt", "dl", "rt"]
            cuda_root = os.environ.get("CUDA_PATH") or os.environ.get("CUDA_HOME") or "/usr/local/cuda"
            cuda.includedirs = [os.path.join(cuda_root, "include")]
            cuda.libdirs = [os.path.join(cuda_root, "lib64")]

        if self.options.tokenizer:
            tokenizer = self.cpp_info.components["tokenizer"]
            tokenizer.set_property("cmake_target_name", "trainkit::tokenizer")
            tokenizer.requires = ["core"]
            if "utf8proc" in self.dependencies:  # else the build module finds the system's
                tokenizer.requires.append("utf8proc::utf8proc")
            tokenizer.bindirs = []
            tokenizer.libdirs = []
            tokenizer.includedirs = []  # the headers are core's

        if self.options.hf:
            hf = self.cpp_info.components["hf"]
            hf.set_property("cmake_target_name", "trainkit::hf")
            hf.requires = ["core"]
            if "nlohmann_json" in self.dependencies:  # else the build module finds the system's
                hf.requires.append("nlohmann_json::nlohmann_json")
            hf.bindirs = []
            hf.libdirs = []
            hf.includedirs = []

        if self.options.mpi:
            mpi = self.cpp_info.components["mpi"]
            mpi.set_property("cmake_target_name", "trainkit::mpi")
            mpi.requires = ["core"]
            mpi.bindirs = []
            mpi.libdirs = []
            mpi.includedirs = []  # MPI's own come with MPI::MPI_CXX (the build module)
