// Package clusterstate is the cluster state machine of the agent service
// as pure functions: the upstream cluster statuses, the refresh from the
// cluster's validations and its hosts' statuses and stages, when the
// service starts an install, and the install's progress.
package clusterstate

// Cluster statuses (upstream's).
const (
	StatusInsufficient                = "insufficient"
	StatusReady                       = "ready"
	StatusError                       = "error"
	StatusPreparingForInstallation    = "preparing-for-installation"
	StatusPendingForInput             = "pending-for-input"
	StatusInstalling                  = "installing"
	StatusFinalizing                  = "finalizing"
	StatusInstalled                   = "installed"
	StatusAddingHosts                 = "adding-hosts"
	StatusCancelled                   = "cancelled"
	StatusInstallingPendingUserAction = "installing-pending-user-action"
)

// Statuses are every cluster status, in the order above.
var Statuses = []string{
	StatusInsufficient, StatusReady, StatusError, StatusPreparingForInstallation, StatusPendingForInput,
	StatusInstalling, StatusFinalizing, StatusInstalled, StatusAddingHosts, StatusCancelled, StatusInstallingPendingUserAction,
}

// Status infos (upstream's texts).
const (
	InfoReady                 = "Cluster ready to be installed"
	InfoInsufficient          = "Cluster is not ready for install"
	InfoPendingForInput       = "User input required"
	InfoPreparing             = "Preparing cluster for installation"
	InfoInstalling            = "Installation in progress"
	InfoInstallingPendingUser = "Cluster has hosts pending user action"
	InfoFinalizing            = "Finalizing cluster installation"
	InfoInstalled             = "Cluster is installed"
	InfoError                 = "cluster has hosts in error"
	InfoAddingHosts           = "cluster is adding hosts to existing OCP cluster"
	InfoUnpreparingHost       = "At least one host has stopped preparing for installation"
)
