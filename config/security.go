package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// TLSConfig builds the TLS configuration towards the brokers from kafka.tls,
// reading the CA bundle and the client key pair; nil when TLS is disabled.
// Errors name the key whose file is at fault.
func (k Kafka) TLSConfig() (*tls.Config, error) {
	t := k.TLS
	if !t.Enabled {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // an explicit, documented testing switch
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// SASLMechanism builds the kafka-go SASL mechanism from kafka.sasl; nil when
// no mechanism is configured. The password comes from kafka.sasl.password
// (typically KERNELSTREAM_KAFKA_SASL_PASSWORD) or kafka.sasl.password_file.
func (k Kafka) SASLMechanism() (sasl.Mechanism, error) {
	s := k.SASL
	if s.Mechanism == "" {
		return nil, nil
	}
	password := s.Password.Reveal()
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.sasl.password_file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
		if password == "" {
			return nil, fmt.Errorf("kafka.sasl.password_file: %s is empty", s.PasswordFile)
		}
	}
	switch s.Mechanism {
	case "plain":
		return plain.Mechanism{Username: s.Username, Password: password}, nil
	case "scram-sha-256":
		m, err := scram.Mechanism(scram.SHA256, s.Username, password)
		if err != nil {
			return nil, fmt.Errorf("kafka.sasl: %w", err)
		}
		return m, nil
	case "scram-sha-512":
		m, err := scram.Mechanism(scram.SHA512, s.Username, password)
		if err != nil {
			return nil, fmt.Errorf("kafka.sasl: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: %q: want plain, scram-sha-256 or scram-sha-512", s.Mechanism)
}
