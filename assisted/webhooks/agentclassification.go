package webhooks

import (
	"context"
	"strings"

	"github.com/itchyny/gojq"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// +kubebuilder:webhook:path=/validate-agent-install-openshift-io-v1beta1-agentclassification,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent-install.openshift.io,resources=agentclassifications,verbs=create;update,versions=v1beta1,name=validation.agentclassification.agent-install.openshift.io,admissionReviewVersions=v1

// Upstream's refusals of AgentClassifications; the others are the label
// validation's and gojq's messages, for field spec.
const (
	msgLabelModified      = "Label modified: the specified label may not be modified after creation"
	msgQueryErrorReserved = "label must not start with QUERYERROR as this is reserved"
)

// queryErrorPrefix starts the label value of the Agents a query failed on.
const queryErrorPrefix = "QUERYERROR"

// AgentClassification validates AgentClassifications on create and update.
type AgentClassification struct{}

var _ admission.Validator[*agentinstallv1.AgentClassification] = &AgentClassification{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *AgentClassification) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &agentinstallv1.AgentClassification{}).WithValidator(w).Complete()
}

// ValidateCreate refuses, all problems in one message: a label (the
// prefix, labelKey and labelValue) that is not a valid Kubernetes label, a
// labelValue starting with QUERYERROR, and a query gojq does not parse.
func (w *AgentClassification) ValidateCreate(_ context.Context, c *agentinstallv1.AgentClassification) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs := metav1validation.ValidateLabels(map[string]string{agentinstallv1.ClassificationLabelPrefix + c.Spec.LabelKey: c.Spec.LabelValue}, path)
	if strings.HasPrefix(c.Spec.LabelValue, queryErrorPrefix) {
		errs = append(errs, field.Invalid(path, c.Spec.LabelValue, msgQueryErrorReserved))
	}
	errs = append(errs, validateQuery(c.Spec.Query, path)...)
	return nil, refuse(errs)
}

// ValidateUpdate refuses a changed labelKey or labelValue, and a changed
// query gojq does not parse. (Upstream checks the query on create only; an
// unchanged query is not checked again.)
func (w *AgentClassification) ValidateUpdate(_ context.Context, old, c *agentinstallv1.AgentClassification) (admission.Warnings, error) {
	if old.Spec.LabelKey != c.Spec.LabelKey || old.Spec.LabelValue != c.Spec.LabelValue {
		return nil, badRequest(msgLabelModified)
	}
	if old.Spec.Query == c.Spec.Query {
		return nil, nil
	}
	return nil, refuse(validateQuery(c.Spec.Query, field.NewPath("spec")))
}

// ValidateDelete allows every delete.
func (w *AgentClassification) ValidateDelete(context.Context, *agentinstallv1.AgentClassification) (admission.Warnings, error) {
	return nil, nil
}

func validateQuery(query string, path *field.Path) field.ErrorList {
	if _, err := gojq.Parse(query); err != nil {
		return field.ErrorList{field.Invalid(path, query, err.Error())}
	}
	return nil
}

// refuse is errs as one refusal, as upstream aggregates them; nil without
// errors.
func refuse(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return badRequest(errs.ToAggregate().Error())
}
