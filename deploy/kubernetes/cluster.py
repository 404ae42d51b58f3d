"""The same GPU cluster from Python, with dask-kubernetes' KubeCluster, and a sort on it.

    pip install dask-kubernetes 'distsort[cuda13,zarr]'
    python deploy/kubernetes/cluster.py /data/input.npy /data/sorted.npy

Run it where the pods' /data volume is mounted too (e.g. in a pod of the cluster's
namespace); the sort itself runs on the GPU workers.
"""
import sys
from pathlib import Path

import yaml
from dask_kubernetes.operator import KubeCluster

from distsort import cli


def main(argv):
    spec = yaml.safe_load((Path(__file__).parent / "daskcluster.yaml").read_text())
    with KubeCluster(custom_cluster_spec=spec) as cluster:
        cluster.wait_for_workers(spec["spec"]["worker"]["replicas"])
        return cli.main(["sort", *argv, "--scheduler-address", cluster.scheduler_address,
                         "--device", "gpu", "--verify"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
