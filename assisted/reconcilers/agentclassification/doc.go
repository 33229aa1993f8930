// Package agentclassification reconciles AgentClassifications, split in two
// controllers as upstream's assisted service splits them:
//
//   - the label controller (LabelReconciler) runs each AgentClassification's
//     query on the status.inventory of every Agent of its namespace and sets
//     or removes the Agent's agentclassification.agent-install.openshift.io/
//     <labelKey> label (valued labelValue, or QUERYERROR-<labelValue> when
//     the query fails on it);
//   - the classification controller (Reconciler) counts the Agents carrying
//     those labels into status.matchedCount and status.errorCount, reports
//     the QueryErrors condition and holds its finalizer until no Agent
//     matches any more.
//
// The package writes nothing but the labels it owns on Agents and the
// AgentClassifications' finalizer and status: never an Agent's spec or
// status, nor a label of another classification's value.
package agentclassification
