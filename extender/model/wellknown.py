"""Well-known node labels (k8s.io/api/core/v1 well_known_labels.go) that scheduling reads."""

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
# Deprecated since v1.17, still honoured where kube-scheduler honours them (VolumeZone, in-tree disks).
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
