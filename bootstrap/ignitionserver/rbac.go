package ignitionserver

// The ignition server reads the Secrets of the configs it serves, directly,
// and records a config's first fetch on its Secret.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update
