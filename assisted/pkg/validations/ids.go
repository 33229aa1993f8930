package validations

// Host validation IDs (upstream's).
const (
	IDConnected                     = "connected"
	IDHasInventory                  = "has-inventory"
	IDHasMinCPUCores                = "has-min-cpu-cores"
	IDHasMinMemory                  = "has-min-memory"
	IDHasMinValidDisks              = "has-min-valid-disks"
	IDHasCPUCoresForRole            = "has-cpu-cores-for-role"
	IDHasMemoryForRole              = "has-memory-for-role"
	IDHostnameUnique                = "hostname-unique"
	IDHostnameValid                 = "hostname-valid"
	IDHostMachineCIDRDefined        = "machine-cidr-defined"
	IDBelongsToMachineCIDR          = "belongs-to-machine-cidr"
	IDNTPSynced                     = "ntp-synced"
	IDSufficientInstallDiskSpeed    = "sufficient-installation-disk-speed"
	IDCompatibleWithClusterPlatform = "compatible-with-cluster-platform"
	IDAPIDomainResolved             = "api-domain-name-resolved-correctly"
	IDAPIIntDomainResolved          = "api-int-domain-name-resolved-correctly"
	IDAppsDomainResolved            = "apps-domain-name-resolved-correctly"
	IDDiskEncryptionSatisfied       = "disk-encryption-requirements-satisfied"
)

// Cluster validation IDs (upstream's).
const (
	IDMachineCIDRDefined     = "machine-cidr-defined"
	IDClusterCIDRDefined     = "cluster-cidr-defined"
	IDServiceCIDRDefined     = "service-cidr-defined"
	IDNoCIDRsOverlapping     = "no-cidrs-overlapping"
	IDNetworkPrefixValid     = "network-prefix-valid"
	IDAPIVIPsDefined         = "api-vips-defined"
	IDAPIVIPsValid           = "api-vips-valid"
	IDIngressVIPsDefined     = "ingress-vips-defined"
	IDIngressVIPsValid       = "ingress-vips-valid"
	IDDNSDomainDefined       = "dns-domain-defined"
	IDNetworkTypeValid       = "network-type-valid"
	IDNTPServerConfigured    = "ntp-server-configured"
	IDAllHostsReadyToInstall = "all-hosts-are-ready-to-install"
	IDSufficientMastersCount = "sufficient-masters-count"
	IDPullSecretSet          = "pull-secret-set"
)

// Host roles as validations see them (spec.role, status.role).
const (
	RoleMaster     = "master"
	RoleWorker     = "worker"
	RoleArbiter    = "arbiter"
	RoleBootstrap  = "bootstrap"
	RoleAutoAssign = "auto-assign"
)
