"""cuda_library: .cu sources compiled by nvcc (/usr/local/cuda) into a static
archive, wrapped in a cc_library that g++-compiled code links.

nvcc is not a Bazel toolchain here, so each .cu is compiled by a genrule. The
archive must be linked statically and whole (linkstatic + alwayslink): a test
linked dynamically otherwise fails at run time with undefined cudart symbols.
Builds on machines without a GPU; whether one is present is a run-time
question (cudaGetDeviceCount)."""

_ARCHES = [
    "-gencode arch=compute_75,code=sm_75",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=[sm_90,compute_90]",
]

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None):
    """srcs: .cu files; hdrs: headers they and their users include."""
    objs = []
    for src in srcs:
        obj = "_%s_%s.o" % (name, src.replace("/", "_").replace(".cu", ""))
        native.genrule(
            name = "_%s_%s_nvcc" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                "/usr/local/cuda/bin/nvcc -std=c++17 -O3 -Xcompiler -fPIC",
                "-Xcompiler -Wall,-Wextra,-Werror --Werror all-warnings",
                "-I. -I$(GENDIR)",
            ] + _ARCHES + copts + [
                "-c $(location %s) -o $@" % src,
            ]),
            message = "nvcc %s" % src,
        )
        objs.append(":" + obj)
    native.genrule(
        name = name + "_archive",
        srcs = objs,
        # ".lo": Bazel treats only that suffix as an always-link archive; a
        # prebuilt ".a" in srcs has its alwayslink silently ignored.
        outs = ["lib%s_cu.lo" % name],
        cmd = "ar rcs $@ $(SRCS)",
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_archive"],
        hdrs = hdrs,
        deps = deps + ["//third_party:cudart_static"],
        alwayslink = True,
        linkstatic = True,
        visibility = visibility,
    )
