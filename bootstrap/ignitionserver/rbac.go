package ignitionserver

// The ignition server reads the Secrets of the configs it serves, directly.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
