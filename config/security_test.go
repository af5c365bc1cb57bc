package config

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	dir                       string
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(cn string, usage x509.ExtKeyUsage, ip bool) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := &testPKI{dir: dir, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue("broker", x509.ExtKeyUsageServerAuth, true)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue("kernelstream", x509.ExtKeyUsageClientAuth, false)
	p.certFile = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p.keyFile = write("client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

// TestTLSAndSASLAgainstBroker connects through the Dialer and Transport that
// Clients builds to an embedded broker demanding mutual TLS and SASL, for
// each SASL mechanism, and checks that a wrong password is refused.
func TestTLSAndSASLAgainstBroker(t *testing.T) {
	pki := newTestPKI(t)
	const user, pass = "svc", "correct horse"
	b, err := broker.Start(broker.Options{
		TLS: &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Users: []broker.User{
			{Mechanism: "PLAIN", Name: user, Password: pass},
			{Mechanism: "SCRAM-SHA-256", Name: user, Password: pass},
			{Mechanism: "SCRAM-SHA-512", Name: user, Password: pass},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pwFile := filepath.Join(pki.dir, "password")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		k := Default().Kafka
		k.Brokers = b.Addrs()
		k.TLS = TLS{Enabled: true, CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile}
		k.SASL = SASL{Mechanism: mech, Username: user, PasswordFile: pwFile}
		dialer, transport, err := k.Clients()
		if err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		conn, err := dialer.DialContext(ctx, "tcp", b.Addrs()[0])
		if err != nil {
			t.Fatalf("%s: dial: %v", mech, err)
		}
		_, err = conn.ReadPartitions()
		conn.Close()
		if err != nil {
			t.Fatalf("%s: metadata: %v", mech, err)
		}
		// RequireAll, so that the produce is answered over the authenticated
		// connection rather than sent and forgotten.
		w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "secure-" + mech, Transport: transport, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
		admin := &kafka.Client{Addr: w.Addr, Transport: transport}
		if _, err := admin.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: w.Topic, NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
			t.Fatalf("%s: create topic: %v", mech, err)
		}
		if err := b.CreateTopics(ctx, 1, "plain-client"); err == nil {
			t.Fatal("a client without TLS created a topic on the TLS broker")
		}
		err = w.WriteMessages(ctx, kafka.Message{Value: []byte("x")})
		w.Close()
		if err != nil {
			t.Fatalf("%s: produce: %v", mech, err)
		}

		k.SASL = SASL{Mechanism: mech, Username: user, Password: "wrong"}
		dialer, _, err = k.Clients()
		if err != nil {
			t.Fatal(err)
		}
		if conn, err := dialer.DialContext(ctx, "tcp", b.Addrs()[0]); err == nil {
			conn.Close()
			t.Errorf("%s: wrong password accepted", mech)
		}
	}
	// Without the client certificate the broker refuses the handshake.
	k := Default().Kafka
	k.TLS = TLS{Enabled: true, CAFile: pki.caFile}
	k.SASL = SASL{Mechanism: "plain", Username: user, Password: pass}
	dialer, _, _ := k.Clients()
	if conn, err := dialer.DialContext(ctx, "tcp", b.Addrs()[0]); err == nil {
		_, err = conn.ReadPartitions()
		conn.Close()
		if err == nil {
			t.Error("connection without a client certificate accepted")
		}
	}
}

func TestSecurityFileErrorsNameTheKey(t *testing.T) {
	pki := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "nope")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	cases := []struct {
		k    Kafka
		want string
	}{
		{Kafka{TLS: TLS{Enabled: true, CAFile: missing}}, "kafka.tls.ca_file"},
		{Kafka{TLS: TLS{Enabled: true, CAFile: notPEM}}, "kafka.tls.ca_file"},
		{Kafka{TLS: TLS{Enabled: true, CertFile: pki.certFile, KeyFile: missing}}, "kafka.tls.cert_file/key_file"},
		{Kafka{SASL: SASL{Mechanism: "plain", Username: "u", PasswordFile: missing}}, "kafka.sasl.password_file"},
	}
	for _, tc := range cases {
		if _, _, err := tc.k.Clients(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("err = %v, want prefix %q", err, tc.want)
		}
	}
}
