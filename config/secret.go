package config

import "encoding/json"

// Redacted is what a set secret prints as.
const Redacted = "[redacted]"

// Secret is a string that never prints: fmt (%v, %+v, %#v, %s, %q), JSON,
// YAML and zerolog all see Redacted (or "" when unset). Reveal returns the
// value for the one place that needs it, the SASL mechanism.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// MarshalJSON redacts.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML redacts.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText redacts (encoders that prefer encoding.TextMarshaler).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText keeps a Secret decodable from text even though MarshalText
// redacts.
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }
