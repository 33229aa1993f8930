package sim

import (
	"crypto/rand"
	"encoding/base64"
)

func randomPassword() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
