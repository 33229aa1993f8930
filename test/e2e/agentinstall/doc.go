// Package agentinstall runs agent-based installs end to end: the agent
// service on envtest, simulated machines that boot an InfraEnv's discovery
// image and run the real discovery agent, and the installed cluster they
// bring up.
package agentinstall
