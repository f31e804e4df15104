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
# building one); options `nccl` and `cudnn` (with `cuda`) add trainkit::nccl (the NCCL gradient
# reducer: libnccl from the CUDA toolkit or TRAINKIT_NCCL_ROOT) and trainkit::cudnn (the cuDNN
# attention engine: libcudnn and NVRTC from the toolkit or TRAINKIT_CUDNN_ROOT, cudnn-frontend's
# headers from PyPI's nvidia-cudnn-frontend or TRAINKIT_CUDNN_FRONTEND_ROOT), the components
# trainkit's CMake package has. The bundled GPT-2 vocabulary (vocab/gpt2, OpenAI's files with their licence) is
# packaged as share/trainkit/gpt2 and named by TRAINKIT_GPT2_VOCAB_DIR, the default of
# tokenizer::resolve_vocab_dir, as the CMake package does. Eigen, Boost, nlohmann_json and
# utf8proc are ordinary requirements, so a profile may take them from Conan Center or, as
# conan/profiles/system does, from the system via [platform_requires].
import os
import subprocess

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


def _cudnn_frontend_include():
    """cudnn-frontend's headers: TRAINKIT_CUDNN_FRONTEND_ROOT/include, else the include/ folder
    PyPI's nvidia-cudnn-frontend puts beside the packages of the python3 on PATH (Conan itself
    usually runs from a virtual environment of its own, so its interpreter is not asked)."""
    root = os.environ.get("TRAINKIT_CUDNN_FRONTEND_ROOT")
    if root:
        return os.path.join(root, "include")
    try:
        purelib = subprocess.run(
            ["python3", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as err:
        raise ConanInvalidConfiguration(
            "trainkit: cudnn=True: set TRAINKIT_CUDNN_FRONTEND_ROOT (python3 was not usable to "
            f"find nvidia-cudnn-frontend's headers: {err})") from err
    include = os.path.join(purelib, "include")
    if not os.path.isfile(os.path.join(include, "cudnn_frontend.h")):
        raise ConanInvalidConfiguration(
            f"trainkit: cudnn=True: no cudnn_frontend.h in {include} (pip install "
            "nvidia-cudnn-frontend, or set TRAINKIT_CUDNN_FRONTEND_ROOT)")
    return include


class TrainkitConan(ConanFile):
    name = "trainkit"
    description = ("Header-only C++20/CUDA framework for training GPT-style language models "
                   "from five compile-time policies")
    topics = ("deep-learning", "gpt-2", "training", "header-only", "cuda")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {"cuda": [True, False], "openmp": [True, False], "tokenizer": [True, False],
               "hf": [True, False], "mpi": [True, False], "nccl": [True, False],
               "cudnn": [True, False]}
    default_options = {"cuda": False, "openmp": True, "tokenizer": False, "hf": False,
                       "mpi": False, "nccl": False, "cudnn": False}
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
        for part in ("nccl", "cudnn"):
            if self.options.get_safe(part) and not self.options.cuda:
                raise ConanInvalidConfiguration(f"trainkit: option {part}=True needs cuda=True")

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

            if self.options.nccl:
                nccl = self.cpp_info.components["nccl"]
                nccl.set_property("cmake_target_name", "trainkit::nccl")
                nccl.requires = ["cuda"]
                nccl.bindirs = []
                nccl.system_libs = ["nccl"]
                nccl_root = os.environ.get("TRAINKIT_NCCL_ROOT")
                nccl.includedirs = [os.path.join(nccl_root, "include")] if nccl_root else []
                nccl.libdirs = [os.path.join(nccl_root, "lib")] if nccl_root else []

            if self.options.cudnn:
                cudnn = self.cpp_info.components["cudnn"]
                cudnn.set_property("cmake_target_name", "trainkit::cudnn")
                cudnn.requires = ["cuda"]
                cudnn.bindirs = []
                cudnn.system_libs = ["cudnn", "nvrtc"]
                cudnn.defines = ["TRAINKIT_HAS_CUDNN_FRONTEND=1"]
                cudnn_root = os.environ.get("TRAINKIT_CUDNN_ROOT")
                cudnn.includedirs = [_cudnn_frontend_include()]
                cudnn.libdirs = []
                if cudnn_root:
                    cudnn.includedirs.append(os.path.join(cudnn_root, "include"))
                    cudnn.libdirs.append(os.path.join(cudnn_root, "lib"))

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
