"""The Spaces hardware flavors the plan knows: one GPU's memory, bandwidth and throughput."""

from __future__ import annotations

from dataclasses import dataclass

from envace_demo.errors import ConfigError

GIB = 1024**3


@dataclass(frozen=True)
class Hardware:
    """A Spaces hardware flavor (https://huggingface.co/docs/hub/spaces-gpus), one GPU's figures."""

    flavor: str
    gpu: str | None  # None: CPU only
    gpus: int
    memory_gib: float  # one GPU's memory (nvidia-smi's total), or the machine's RAM on CPU
    bandwidth_gbs: float  # memory bandwidth, GB/s (vendor datasheet)
    tflops: float  # dense fp16/bf16 tensor throughput, TFLOPS (vendor datasheet)
    bf16: bool  # compute capability >= 8.0
    cpu_cores: int
    zero_gpu: bool = False
    duration_factor: float = 1.0  # spaces multiplies a ZeroGPU request by this

    @property
    def cuda(self) -> bool:
        return self.gpu is not None


# Sources: NVIDIA datasheets (T4: 320 GB/s, 65 TFLOPS fp16; L4: 300 GB/s, 121 TFLOPS bf16
# dense; A10G, AWS G5's A10 variant: 600 GB/s, ~70 TFLOPS bf16 dense; A100 80GB PCIe:
# 1,935 GB/s, 312 TFLOPS bf16; RTX PRO 6000 Blackwell Server Edition: 1,597 GB/s, ~500 TFLOPS
# bf16 dense). Memory as nvidia-smi reports it (T4 15,360 MiB; L4 23,034 MiB; A10G 23,028
# MiB; A100 81,920 MiB). ZeroGPU today ("zero-a10g" is the flavor's historical name) is half
# an RTX PRO 6000 Blackwell (spaces' zero/configs.json: 101,973,950,464 bytes for the whole
# card, duration_factor 1.5 for a "large" slice); the slice is taken to have half the
# card's bandwidth and throughput too. CPU flavors: 2 vCPU / 16 GB and 8 vCPU / 32 GB RAM;
# their "bandwidth" is what decoding reached on 2 cores (bench: the embedded model's 135M
# fp32 weights, 0.54 GB, at 29.4 tokens/s: 16 GB/s), doubled for 8 cores (unmeasured).
FLAVORS: dict[str, Hardware] = {
    h.flavor: h
    for h in (
        Hardware("cpu-basic", None, 0, 16.0, 16.0, 0.2, False, 2),
        Hardware("cpu-upgrade", None, 0, 32.0, 32.0, 0.8, False, 8),
        Hardware("t4-small", "T4", 1, 15.0, 320.0, 65.0, False, 4),
        Hardware("t4-medium", "T4", 1, 15.0, 320.0, 65.0, False, 8),
        Hardware("l4x1", "L4", 1, 22.49, 300.0, 121.0, True, 8),
        Hardware("l4x4", "L4", 4, 22.49, 300.0, 121.0, True, 48),
        Hardware("a10g-small", "A10G", 1, 22.49, 600.0, 70.0, True, 4),
        Hardware("a10g-large", "A10G", 1, 22.49, 600.0, 70.0, True, 12),
        Hardware("a100-large", "A100", 1, 80.0, 1935.0, 312.0, True, 12),
        Hardware(
            "zero-a10g", "RTX PRO 6000 Blackwell (half)", 1, 101_973_950_464 / 2 / GIB, 1597.0 / 2, 250.0, True, 8,
            zero_gpu=True, duration_factor=1.5,
        ),
    )
}
FLAVOR_NAMES = tuple(FLAVORS)
# Advice where nothing fits: the flavors to try, cheapest first.
GPU_LADDER = ("t4-small", "l4x1", "a10g-large", "a100-large")


def hardware_of(flavor: str) -> Hardware:
    if flavor not in FLAVORS:
        raise ConfigError(f"hardware {flavor!r}: expected one of {', '.join(FLAVORS)}")
    return FLAVORS[flavor]


def dtype_for(hw: Hardware) -> str:
    if not hw.cuda:
        return "float32"  # loader.CPU_AUTO_DTYPE: faster than bf16 on the CPUs measured
    return "bfloat16" if hw.bf16 else "float16"  # a T4 has no bf16
