package cluster

import "testing"

// TestContainerArgs: what the kubelet changes in a container's arguments
// before the runtime runs it.
func TestContainerArgs(t *testing.T) {
	env := map[string]string{"POD_IP": "127.42.0.10", "RELEASE_VERSION": "4.20.0"}
	for _, tc := range []struct{ in, want string }{
		{"--health-addr=:8081", "--health-addr=127.42.0.10:8081"},
		{"--webhook-host=$(POD_IP)", "--webhook-host=127.42.0.10"},
		{"--baremetal-operator-version=$(RELEASE_VERSION)", "--baremetal-operator-version=4.20.0"},
		{"--deploy-url=http://$(HOST_IP):6180", "--deploy-url=http://$(HOST_IP):6180"}, // not in env: as written
		{"--metrics-bind-address=0", "--metrics-bind-address=0"},
		{"--listen=127.0.0.1:80", "--listen=127.0.0.1:80"},
		{"--name=:x", "--name=:x"},
		{":8081", ":8081"},
	} {
		if got := bindTo(expand(tc.in, env), "127.42.0.10"); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestMatches(t *testing.T) {
	master := map[string]string{"node-role.kubernetes.io/master": "", "kubernetes.io/os": "linux"}
	if !matches(map[string]string{"node-role.kubernetes.io/master": ""}, master) || !matches(nil, master) {
		t.Error("a master matches the master selector and the empty one")
	}
	if matches(map[string]string{"node-role.kubernetes.io/worker": ""}, master) {
		t.Error("a master does not match the worker selector")
	}
}
