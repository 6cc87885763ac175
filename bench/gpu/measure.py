"""Measure, on a lent GPU, the three terms protoaudit's GPU figures took on trust.

    python bench/gpu/measure.py OUT_DIR

1. The CUDA context and library handles: the device's used memory (NVML, which makes no context)
   before any CUDA call, after the context, a cuBLAS handle, a cuRAND generator and cuDNN handles,
   with CUDA_MODULE_LOADING=LAZY and EAGER, each in a fresh process; and PyTorch's context beside.
2. cudaMalloc's granularity: N raw cudaMalloc calls (CuPy's runtime API, no pool) of each size, the
   free memory after each; then every device buffer of two nets as protoaudit lists them
   (tests/data/gpu_measured/buffers.json), one cudaMalloc each, as Caffe's SyncedMemory makes them.
3. cuDNN's algorithm choice: for every convolution of tests/data/gpu_measured/convs.json, the ranked lists of
   cudnnGetConvolution{Forward,BackwardData,BackwardFilter}Algorithm_v7 with each algorithm's
   workspace, on descriptors set as Caffe's CuDNNConvolutionLayer sets them (one group's slice).

Needs CuPy (and PyTorch for the one PyTorch row); writes OUT_DIR/gpu_facts.json and prints a short
summary. Each part runs in its own process, so one that fails leaves the others' figures.
"""
import ctypes
import ctypes.util
import glob
import importlib
import json
import os
import subprocess
import sys
import time

INPUTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "tests", "data", "gpu_measured")  # convs.json and buffers.json (bench/gpu/inputs.py)
MiB = 2**20


# --- NVML: the device's used memory, read without a CUDA context ------------------------------------

class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Nvml:
    """NVML by ctypes; where its library is not found, nvidia-smi (MiB, not bytes)."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            self.lib = None
            return
        assert self.lib.nvmlInit_v2() == 0
        self.handle = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)) == 0

    def used(self):
        time.sleep(0.2)  # NVML's figure follows the driver's with a short delay
        if self.lib is None:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout
            return int(out.split()[0]) * MiB
        mem = _NvmlMemory()
        assert self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(mem)) == 0
        return mem.used

    def facts(self):
        if self.lib is None:
            return {"nvidia-smi": subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout}
        name = ctypes.create_string_buffer(96)
        self.lib.nvmlDeviceGetName(self.handle, name, 96)
        driver = ctypes.create_string_buffer(96)
        self.lib.nvmlSystemGetDriverVersion(driver, 96)
        mem = _NvmlMemory()
        self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(mem))
        return {"gpu": name.value.decode(), "driver": driver.value.decode(), "total_bytes": mem.total}


# --- cuDNN through ctypes: the legacy convolution API Caffe calls -------------------------------------

class _AlgoPerf(ctypes.Structure):  # cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int), ("mathType", ctypes.c_int),
                ("reserved", ctypes.c_int * 3)]


def load_cudnn():
    """libcudnn, as CuPy or PyTorch installed it, or the system's."""
    try:
        from cupy_backends.cuda.libs import cudnn  # noqa: F401  (dlopens CuPy's libcudnn)
    except Exception:
        pass
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        load_nvidia_dynamic_lib("cudnn")  # loads it by its soname, found below
    except Exception:
        pass
    names = ["libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"]
    found = ctypes.util.find_library("cudnn")
    if found:
        names.append(found)
    for root in [p for p in sys.path if p.endswith("-packages")] + ["/usr/lib/x86_64-linux-gnu", "/usr/local/cuda"]:
        names += sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcudnn.so*"), recursive=True))
        for folder in (root, os.path.join(root, "lib64")):
            names += sorted(glob.glob(os.path.join(folder, "libcudnn.so*")))
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            lib.cudnnGetConvolutionForwardAlgorithm_v7  # noqa: B018  (the legacy API is there)
            return lib, name
        except (OSError, AttributeError):
            continue
    raise RuntimeError("no libcudnn with the legacy convolution API")


def check(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: cuDNN status {status}")


class Cudnn:
    FLOAT, NCHW, CROSS_CORRELATION = 0, 0, 1

    def __init__(self):
        self.lib, self.path = load_cudnn()
        self.handle = ctypes.c_void_p()
        check(self.lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")

    def tensor(self, n, c, h, w, strides):
        d = ctypes.c_void_p()
        check(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(d)), "tensor")
        check(self.lib.cudnnSetTensor4dDescriptorEx(d, self.FLOAT, n, c, h, w, *strides), "tensor4dEx")
        return d

    def filter(self, k, c, h, w):
        d = ctypes.c_void_p()
        check(self.lib.cudnnCreateFilterDescriptor(ctypes.byref(d)), "filter")
        check(self.lib.cudnnSetFilter4dDescriptor(d, self.FLOAT, self.NCHW, k, c, h, w), "filter4d")
        return d

    def conv(self, pad, stride, dilation):
        d = ctypes.c_void_p()
        check(self.lib.cudnnCreateConvolutionDescriptor(ctypes.byref(d)), "conv")
        check(self.lib.cudnnSetConvolution2dDescriptor(d, pad[0], pad[1], stride[0], stride[1], dilation[0],
                                                       dilation[1], self.CROSS_CORRELATION, self.FLOAT), "conv2d")
        return d

    def ranked(self, kind, *descs):
        """The _v7 heuristic's list, best first: (algo, status, memory, determinism, mathType)."""
        count = ctypes.c_int()
        check(getattr(self.lib, f"cudnnGetConvolution{kind}AlgorithmMaxCount")(self.handle, ctypes.byref(count)),
              "max count")
        perf = (_AlgoPerf * count.value)()
        got = ctypes.c_int()
        check(getattr(self.lib, f"cudnnGetConvolution{kind}Algorithm_v7")(self.handle, *descs, count.value,
                                                                          ctypes.byref(got), perf), kind)
        rows = []
        for p in perf[:got.value]:
            size = ctypes.c_size_t()
            status = getattr(self.lib, f"cudnnGetConvolution{kind}WorkspaceSize")(self.handle, *descs, p.algo,
                                                                                 ctypes.byref(size))
            rows.append({"algo": p.algo, "status": p.status, "memory": p.memory, "determinism": p.determinism,
                         "math": p.mathType, "workspace_size": size.value if status == 0 else None})
        return rows


def caffe_descriptors(cudnn, c):
    """CuDNNConvolutionLayer::Reshape's descriptors: one group's slice of the bottom and top (strides
    of the whole blob), the filter of one group, pad/stride (cudnn_conv_layer.cpp, cudnn.hpp). A
    Deconvolution is the same convolution run the other way: its top is the convolution's input."""
    x, y = (c["bottom"], c["top"]) if c["type"] == "Convolution" else (c["top"], c["bottom"])
    g = c["group"]
    n, cx, hx, wx = x
    _, cy, hy, wy = y
    xd = cudnn.tensor(n, cx // g, hx, wx, (cx * hx * wx, hx * wx, wx, 1))
    yd = cudnn.tensor(n, cy // g, hy, wy, (cy * hy * wy, hy * wy, wy, 1))
    wd = cudnn.filter(cy // g, cx // g, *c["kernel"])
    cd = cudnn.conv(c["pad"], c["stride"], c["dilation"])
    return xd, wd, cd, yd


def part_cudnn():
    import cupy

    cupy.cuda.runtime.free(0)
    cudnn = Cudnn()
    nets = json.load(open(os.path.join(INPUTS, "convs.json")))
    seen, out = {}, {}
    for label, net in nets.items():
        rows = []
        for c in net["convs"]:
            key = json.dumps([c[k] for k in ("type", "bottom", "top", "kernel", "stride", "pad", "dilation", "group")])
            if key not in seen:
                xd, wd, cd, yd = caffe_descriptors(cudnn, c)
                seen[key] = {"fwd": cudnn.ranked("Forward", xd, wd, cd, yd),
                             "bwd_data": cudnn.ranked("BackwardData", wd, yd, cd, xd),
                             "bwd_filter": cudnn.ranked("BackwardFilter", xd, yd, cd, wd)}
            rows.append({"layer": c["layer"], **seen[key]})
        out[label] = rows
    return {"library": cudnn.path, "cudnn_version": cudnn.lib.cudnnGetVersion(), "nets": out}


# --- 1: the context and library handles ---------------------------------------------------------------

def cupy_lib(name):
    """CuPy's binding of a CUDA library (its module moved between CuPy versions)."""
    try:
        return importlib.import_module(f"cupy_backends.cuda.libs.{name}")
    except ImportError:
        return importlib.import_module(f"cupy.cuda.{name}")


def part_context():
    nvml = Nvml()
    stages = [{"stage": "before any CUDA call", "nvml_used": nvml.used()}]
    import cupy

    rt = cupy.cuda.runtime

    def stage(name, do):
        """Run one step and read the device's memory after it; a step that fails is written down."""
        row = {"stage": name}
        try:
            do()
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)
        row["nvml_used"] = nvml.used()
        if len(stages) >= 2:  # cudaMemGetInfo only once the context is there: it would make one
            row["cuda_free"] = rt.memGetInfo()[0]
        stages.append(row)

    libs = {}

    def load():
        libs["cublas"], libs["curand"] = cupy_lib("cublas"), cupy_lib("curand")
        libs["cudnn"] = load_cudnn()[0]

    kept = {}
    stage("libraries loaded (CuPy, cuBLAS, cuRAND, cuDNN)", load)
    stage("context (cudaFree(0))", lambda: rt.free(0))
    stage("cuBLAS handle", lambda: kept.update(cublas=libs["cublas"].create()))
    curand = libs.get("curand")
    stage("cuRAND generator",
          lambda: kept.update(gen=curand.createGenerator(getattr(curand, "CURAND_RNG_PSEUDO_DEFAULT", 100))))
    stage("cuRAND seed", lambda: curand.setPseudoRandomGeneratorSeed(kept["gen"], 1701))
    stage("a 1 MiB cudaMalloc", lambda: kept.update(buf=rt.malloc(MiB)))
    stage("cuRAND generate (1 MiB)",
          lambda: (curand.generate(kept["gen"], kept["buf"], MiB // 4), rt.deviceSynchronize()))

    def cudnn_handles(n, streams):
        for _ in range(n):
            h = ctypes.c_void_p()
            check(libs["cudnn"].cudnnCreate(ctypes.byref(h)), "cudnnCreate")
            if streams:
                check(libs["cudnn"].cudnnSetStream(h, ctypes.c_void_p(rt.streamCreate())), "cudnnSetStream")

    stage("cuDNN handle", lambda: cudnn_handles(1, False))
    stage("63 more cuDNN handles, each with a stream", lambda: cudnn_handles(63, True))
    versions = {"cuda_runtime": rt.runtimeGetVersion(), "cuda_driver": rt.driverGetVersion(), "cupy": cupy.__version__}
    for name, read in (("cudnn", lambda: libs["cudnn"].cudnnGetVersion()),
                       ("cublas", lambda: libs["cublas"].getVersion(kept["cublas"]))):
        try:
            versions[name] = read()
        except Exception as e:  # noqa: BLE001
            versions[name] = repr(e)
    return {"module_loading": os.environ.get("CUDA_MODULE_LOADING", ""), "versions": versions, "stages": stages}


def part_torch():
    nvml = Nvml()
    stages = [("before any CUDA call", nvml.used(), 0)]
    import torch

    stages.append(("import torch", nvml.used(), 0))
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    stages.append(("context and a 4-byte tensor", nvml.used(), torch.cuda.memory_reserved()))
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
    y = conv(torch.zeros(8, 64, 56, 56, device="cuda"))
    y.sum().backward()
    torch.cuda.synchronize()
    stages.append(("a cuDNN convolution forward and backward", nvml.used(), torch.cuda.memory_reserved()))
    del x
    return {"module_loading": os.environ.get("CUDA_MODULE_LOADING", "(PyTorch's default)"),
            "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                         "cudnn": torch.backends.cudnn.version()},
            "stages": [{"stage": n, "nvml_used": u, "torch_reserved": r} for n, u, r in stages]}


# --- 2: cudaMalloc's granularity --------------------------------------------------------------------

SIZES = [(4, 2048), (1024, 2048), (100 * 1024, 512), (MiB, 256), (2 * MiB + 1, 128), (20 * MiB + 1, 32)]


def part_malloc():
    import cupy

    rt = cupy.cuda.runtime
    rt.free(rt.malloc(4))  # the context and the allocator's first page, outside the figures
    out = []
    for size, n in SIZES:
        free0 = rt.memGetInfo()[0]
        ptrs, after = [], []
        for _ in range(n):
            ptrs.append(rt.malloc(size))
            after.append(free0 - rt.memGetInfo()[0])
        for p in ptrs:
            rt.free(p)
        out.append({"size": size, "n": n, "drop_after_each": after, "left_after_free": free0 - rt.memGetInfo()[0]})
    nets = {}
    for label, sizes in json.load(open(os.path.join(INPUTS, "buffers.json"))).items():
        free0 = rt.memGetInfo()[0]
        ptrs = [rt.malloc(s) for s in sizes]
        drop = free0 - rt.memGetInfo()[0]
        for p in ptrs:
            rt.free(p)
        nets[label] = {"buffers": len(sizes), "requested": sum(sizes), "drop": drop}
    return {"sizes": out, "nets": nets}


def part_pages():
    """How cudaMalloc packs small allocations: the index at which each 2 MiB page is taken, for N
    allocations of one size (allocations per page give the slot size); and three orders of 1.5, 1 and
    0.5 MiB allocations that tell first-fit, best-fit and bump allocation apart."""
    import cupy

    rt = cupy.cuda.runtime
    rt.free(rt.malloc(4))
    slots = []
    for size in (1, 4, 255, 256, 257, 511, 512, 513, 1000, 1024, 1025, 2048, 4097, 65537, 699051, 1048577):
        n = min(20000, 6 * (2 * MiB // max(size, 256)))
        free0 = rt.memGetInfo()[0]
        ptrs, steps, last = [], [], 0
        for i in range(n):
            ptrs.append(rt.malloc(size))
            drop = free0 - rt.memGetInfo()[0]
            if drop != last:
                steps.append([i, drop - last])
                last = drop
        for p in ptrs:
            rt.free(p)
        slots.append({"size": size, "n": n, "steps": steps[:12], "pages": len(steps), "drop": last})
    orders = {}
    half = MiB // 2
    for name, sizes in (("1.5,1,1,0.5", [3 * half, 2 * half, 2 * half, half]),
                        ("1,1.5,0.5,1", [2 * half, 3 * half, half, 2 * half]),
                        ("1.5,0.5,1.5,0.5", [3 * half, half, 3 * half, half])):
        free0 = rt.memGetInfo()[0]
        ptrs = [rt.malloc(x) for x in sizes]
        orders[name] = free0 - rt.memGetInfo()[0]
        for p in ptrs:
            rt.free(p)
    return {"slots": slots, "orders": orders}


def part_handles():
    """What a cuDNN handle costs, and a stream, apart: 64 of each in turn, then 64 of each paired
    with cudnnSetStream as Caffe's CuDNNConvolutionLayer does; and 16 cuBLAS handles."""
    import cupy

    rt = cupy.cuda.runtime
    nvml = Nvml()
    rt.free(0)
    lib = load_cudnn()[0]
    cublas = cupy_lib("cublas")
    rows = [{"stage": "context", "nvml_used": nvml.used(), "cuda_free": rt.memGetInfo()[0]}]

    def stage(name, do):
        do()
        rt.deviceSynchronize()
        rows.append({"stage": name, "nvml_used": nvml.used(), "cuda_free": rt.memGetInfo()[0]})

    def handles(n):
        out = []
        for _ in range(n):
            h = ctypes.c_void_p()
            check(lib.cudnnCreate(ctypes.byref(h)), "cudnnCreate")
            out.append(h)
        return out

    first = []
    stage("1 cuDNN handle", lambda: first.extend(handles(1)))
    stage("64 more cuDNN handles", lambda: first.extend(handles(64)))
    streams = []
    stage("64 streams", lambda: streams.extend(rt.streamCreate() for _ in range(64)))
    stage("cudnnSetStream on 64 of those handles",
          lambda: [check(lib.cudnnSetStream(h, ctypes.c_void_p(st)), "setStream") for h, st in zip(first[1:], streams)])
    pairs = []
    stage("64 more handles, each with a new stream", lambda: pairs.extend(
        check(lib.cudnnSetStream(h, ctypes.c_void_p(rt.streamCreate())), "setStream") or h for h in handles(64)))
    stage("16 cuBLAS handles", lambda: [cublas.create() for _ in range(16)])
    return {"stages": rows}


PARTS = {"pages": part_pages, "handles": part_handles, "context": part_context, "torch": part_torch,
         "malloc": part_malloc, "cudnn": part_cudnn}
RUNS = [  # (key, part, CUDA_MODULE_LOADING, seconds allowed)
    ("pages", "pages", "LAZY", 90), ("handles", "handles", "LAZY", 90), ("handles_eager", "handles", "EAGER", 90),
    ("context_lazy", "context", "LAZY", 60), ("context_eager", "context", "EAGER", 90), ("cudnn", "cudnn", "LAZY", 90),
    ("malloc", "malloc", "LAZY", 90), ("torch", "torch", None, 90),
]


def main(out_dir):
    facts = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        facts["device"] = Nvml().facts()
    except Exception as e:  # noqa: BLE001  (a part that fails is written down, not fatal)
        facts["device"] = {"error": repr(e)}
    os.makedirs(out_dir, exist_ok=True)
    for key, part, loading, allowed in RUNS:
        env = dict(os.environ)
        env.pop("CUDA_MODULE_LOADING", None)
        if loading:
            env["CUDA_MODULE_LOADING"] = loading
        started = time.time()
        try:
            run = subprocess.run([sys.executable, __file__, "--part", part], env=env, capture_output=True,
                                 text=True, timeout=allowed)
            facts[key] = json.loads(run.stdout) if run.returncode == 0 else {"error": run.stderr[-3000:]}
        except Exception as e:  # noqa: BLE001
            facts[key] = {"error": repr(e)}
        facts[key]["seconds"] = round(time.time() - started, 1)
        print(key, facts[key]["seconds"], "s", "error" if "error" in facts[key] else "ok", flush=True)
        with open(os.path.join(out_dir, "gpu_facts.json"), "w") as f:  # after each part: a cut run keeps some
            json.dump(facts, f, indent=1)
    summary(facts)


def summary(facts):
    print(json.dumps(facts.get("device")))
    for key in ("handles", "handles_eager", "context_lazy", "context_eager", "torch"):
        part = facts.get(key, {})
        if "stages" in part:
            base = part["stages"][0]["nvml_used"]
            print(key, part.get("versions"))
            for s in part["stages"]:
                print(f"  {(s['nvml_used'] - base) / MiB:9.1f} MiB  {s['stage']}")
        else:
            print(key, part.get("error", "")[-600:])
    for s in facts.get("pages", {}).get("slots", []):
        print(f"pages {s['size']:>8} x{s['n']}: {s['pages']} pages, steps {s['steps'][:5]}")
    print("orders", facts.get("pages", {}).get("orders"), facts.get("pages", {}).get("error", "")[-600:])
    for s in facts.get("malloc", {}).get("sizes", []):
        print(f"malloc {s['size']:>9} x{s['n']}: {s['drop_after_each'][-1] / s['n']:.0f} B each;"
              f" first {s['drop_after_each'][:4]}")
    for label, n in facts.get("malloc", {}).get("nets", {}).items():
        print(f"buffers {label}: {n['buffers']} requested {n['requested']} drop {n['drop']}")
    if "error" in facts.get("malloc", {}):
        print("malloc", facts["malloc"]["error"][-600:])
    c = facts.get("cudnn", {})
    print("cudnn", c.get("library"), c.get("cudnn_version"), c.get("error", "")[-600:])


if __name__ == "__main__":
    if sys.argv[1] == "--part":
        print(json.dumps(PARTS[sys.argv[2]]()))
    else:
        main(sys.argv[1])
