package server

// What the agent service's handlers read and write on the hub, beyond the
// Events of events.go: the Agents it registers and updates, the InfraEnvs
// whose status it records, the install records it reads (ClusterDeployment,
// AgentClusterInstall, ClusterImageSet, AgentServiceConfig, NMStateConfigs),
// and the pull secret and install state, read from the cache of Secrets
// labelled record.CachedLabel (a pull secret is labelled on its first read).
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents/status;infraenvs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=infraenvs;nmstateconfigs;agentserviceconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.hive.openshift.io,resources=agentclusterinstalls,verbs=get;list;watch
// +kubebuilder:rbac:groups=hive.openshift.io,resources=clusterdeployments;clusterimagesets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
