"""Small traces in the openb format, written by the tests (the real ones are not copied here)."""

from __future__ import annotations

from pathlib import Path

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def write_nodes(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([NODE_HEADER, *rows]) + "\n")
    return path


def write_pods(path: Path, rows: list[str]) -> Path:
    """Each row: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec (the rest is filled in)."""
    path.write_text("\n".join([POD_HEADER, *(f"{row},LS,Running,0,0,0" for row in rows)]) + "\n")
    return path


def small_cluster(tmp_path: Path) -> tuple[Path, Path]:
    """6 GPU nodes of three models and 30 pods (22.5 GPUs of 21): shares, whole GPUs, 2-GPU pods, CPU-only pods."""
    nodes = write_nodes(tmp_path / "nodes.csv", [
        "n0,32000,131072,2,T4", "n1,32000,131072,2,T4", "n2,64000,262144,4,V100",
        "n3,64000,262144,4,V100", "n4,96000,393216,8,G2", "n5,8000,32768,1,T4"])
    rows = []
    for i in range(30):
        kind = i % 5
        if kind == 0:
            rows.append(f"p{i:03d},4000,8192,1,500,")
        elif kind == 1:
            rows.append(f"p{i:03d},8000,16384,1,1000,")
        elif kind == 2:
            rows.append(f"p{i:03d},2000,4096,1,250,T4|V100")
        elif kind == 3:
            rows.append(f"p{i:03d},16000,32768,2,1000,")
        else:
            rows.append(f"p{i:03d},6000,8192,0,0,")
    pods = write_pods(tmp_path / "pods.csv", rows)
    return nodes, pods
