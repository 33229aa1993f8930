package ignition

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestRemoteToken(t *testing.T) {
	g := NewWithT(t)
	pointer, err := Remote(RemoteOptions{URL: "https://192.0.2.1:6181/ignition/v1/ns/cfg", Token: "1893553445.s1g", Full: []byte(`{"ignition":{"version":"3.4.0"}}`)})
	g.Expect(err).NotTo(HaveOccurred())
	token, ok := RemoteToken(pointer)
	g.Expect(ok).To(BeTrue())
	g.Expect(token).To(Equal("1893553445.s1g"))

	for _, other := range []string{`{"ignition":{"version":"3.4.0"}}`, "not ignition", ""} {
		_, ok := RemoteToken([]byte(other))
		g.Expect(ok).To(BeFalse(), other)
	}
}
