package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/kernelstream/kernelstream/processor"
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
		pool, err := readCAs("kafka.tls.ca_file", t.CAFile)
		if err != nil {
			return nil, err
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

// readCAs reads the PEM bundle file of key as a certificate pool.
func readCAs(key, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", key, file)
	}
	return pool, nil
}

// SASLAccount reads the SASL account of kafka.sasl; nil when no mechanism
// is configured. The password comes from kafka.sasl.password (typically
// KERNELSTREAM_KAFKA_SASL_PASSWORD) or kafka.sasl.password_file.
func (k Kafka) SASLAccount() (*processor.SASL, error) {
	s := k.SASL
	if s.Mechanism == "" {
		return nil, nil
	}
	if err := processor.CheckChoice(s.Mechanism, processor.SASLMechanisms); err != nil {
		return nil, fmt.Errorf("kafka.sasl.mechanism: %w", err)
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
	return &processor.SASL{Mechanism: s.Mechanism, Username: s.Username, Password: password}, nil
}

// Security reads what every connection to the brokers needs: the TLS
// configuration of kafka.tls (nil when disabled) and the SASL account of
// kafka.sasl (nil when none). Errors name the key at fault.
func (k Kafka) Security() (*tls.Config, *processor.SASL, error) {
	tc, err := k.TLSConfig()
	if err != nil {
		return nil, nil, err
	}
	sasl, err := k.SASLAccount()
	if err != nil {
		return nil, nil, err
	}
	return tc, sasl, nil
}
