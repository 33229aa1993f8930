// Package assistedapi (api/assisted/v2) is the contract between the agent
// service of the agent-based install (assisted/) and the discovery agent on
// a host booted from an InfraEnv's discovery image: the subset of the
// assisted service's REST API (swagger, base /api/assisted-install) that an
// agent uses, with its JSON names.
//
// The agent finds the service URL, its InfraEnv's ID and the InfraEnv's
// key in the image's boot configuration (deployapi.BootConfig's
// Discovery). The key ("X-Secret-Key: <key>") only registers; the answer
// to a new host's registration carries the host's credential in
// HostKeyHeader, which every other call sends ("X-Metalshift-Host-Key:
// <credential>"), a registration of the same host again included:
//
//	POST {service}/api/assisted-install/v2/infra-envs/{ie}/hosts                        ← HostCreateParams → 201 Host (+ credential)
//	GET  {service}/api/assisted-install/v2/infra-envs/{ie}/hosts/{h}/instructions       → Steps
//	POST {service}/api/assisted-install/v2/infra-envs/{ie}/hosts/{h}/instructions       ← StepReply (204)
//	PUT  {service}/api/assisted-install/v2/infra-envs/{ie}/hosts/{h}/progress           ← HostProgress (200)
//	GET  {service}/api/assisted-install/v2/clusters/{c}/downloads/files?file_name=...   → the host's Ignition
//	POST {service}/api/assisted-install/v2/clusters/{c}/logs?logs_type=host&infra_env_id=&host_id=  ← multipart upfile
//
// An agent stops registering on 401, 403, 404 and 409. Errors are Error.
// The host ID is the machine's UUID; the Agent object of the host is named
// after it.
package assistedapi
