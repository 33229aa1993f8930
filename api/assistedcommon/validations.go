// Package assistedcommon holds the types the agent-install and hive
// extension API groups share, as upstream's api/common does: one Go type
// for one wire shape. Types only.
//
// +kubebuilder:object:generate=true
package assistedcommon

// ValidationsStatus maps a validation category to its results: the
// validationsInfo of an Agent's and of an AgentClusterInstall's status.
type ValidationsStatus map[string]ValidationsResults

// ValidationsResults are the results of a category's validations.
type ValidationsResults []ValidationResult

// ValidationResult is one validation's result.
type ValidationResult struct {
	// id of the validation.
	ID string `json:"id"`
	// status: success, failure, pending, error or disabled.
	Status string `json:"status"`
	// message for people.
	Message string `json:"message"`
}
