package deployserver

// What the deploy server reads and writes on the hub: hosts (and the
// status its agents report), their PreprovisioningImages, and the network
// data Secrets, read directly.
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts;preprovisioningimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
