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

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/processor"
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

// TestTLSAndSASLAgainstBroker: with kafka.tls (mutual TLS) and each SASL
// mechanism, the service's configuration gives a processor whose two
// clients (the group's and the record path's) both connect: a labelled
// record is predicted. A wrong password and a missing client certificate
// are refused.
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
	t.Cleanup(b.Close) // after the parallel subtests, which run once this function returns
	pwFile := filepath.Join(pki.dir, "password")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plainCtx, plainCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer plainCancel()
	if err := b.CreateTopics(plainCtx, 1, "plain-client"); err == nil {
		t.Fatal("a client without TLS created a topic on the TLS broker")
	}
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := Default()
			c.Kafka.Brokers = b.Addrs()
			c.Kafka.Group, c.Kafka.InputTopic, c.Kafka.OutputTopic, c.Kafka.DLQTopic = "g-"+mech, "in-"+mech, "out-"+mech, "dlq-"+mech
			for _, topic := range []string{c.Kafka.InputTopic, c.Kafka.OutputTopic, c.Kafka.DLQTopic} {
				if err := b.Cluster().CreateTopic(topic, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			c.Kafka.TLS = TLS{Enabled: true, CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile}
			c.Kafka.SASL = SASL{Mechanism: mech, Username: user, PasswordFile: pwFile}
			c.Kafka.SessionTimeout, c.Kafka.HeartbeatInterval = 6*time.Second, 200*time.Millisecond
			c.Model.Algorithm, c.Model.Dim = "kogd", 2
			c.Checkpoint.Dir = t.TempDir()
			pcfg, err := c.ProcessorConfig(zerolog.Nop(), nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := processor.New(pcfg)
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- p.Run(runCtx) }()
			defer func() {
				stop()
				if err := <-ran; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()

			kc, err := kafkaio.New(kafkaio.Options{Brokers: b.Addrs(), TLS: pcfg.TLS,
				SASL: &kafkaio.SASL{Mechanism: mech, Username: user, Password: pass}})
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			rec := kafkaio.Record{Topic: c.Kafka.InputTopic, Partition: 0, Key: []byte("u"), Value: []byte(`{"id":"1","x":[1,2],"y":1}`)}
			acked := make(chan error, 1)
			kc.Produce(ctx, &rec, func(_ *kafkaio.Record, err error) { acked <- err })
			if err := <-acked; err != nil {
				t.Fatalf("produce: %v", err)
			}
			out := kc.Read(c.Kafka.OutputTopic, 0, kafkaio.Start)
			defer out.Close()
			for got := false; !got; {
				select {
				case <-out.Ready():
					ch, ok := out.Next()
					got = ok && len(ch.Records) > 0
				case <-ctx.Done():
					t.Fatal("no prediction within 30 s")
				}
			}

			wrong, err := kafkaio.New(kafkaio.Options{Brokers: b.Addrs(), TLS: pcfg.TLS,
				SASL: &kafkaio.SASL{Mechanism: mech, Username: user, Password: "wrong"}})
			if err != nil {
				t.Fatal(err)
			}
			defer wrong.Close()
			qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
			defer qcancel()
			if _, err := wrong.Offsets(qctx, c.Kafka.InputTopic, 0); err == nil {
				t.Error("wrong password accepted")
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		k := Default().Kafka
		k.TLS = TLS{Enabled: true, CAFile: pki.caFile}
		tc, _, err := k.Security()
		if err != nil {
			t.Fatal(err)
		}
		kc, err := kafkaio.New(kafkaio.Options{Brokers: b.Addrs(), TLS: tc, SASL: &kafkaio.SASL{Mechanism: "plain", Username: user, Password: pass}})
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := kc.Offsets(ctx, "plain-client", 0); err == nil {
			t.Error("connection without a client certificate accepted")
		}
	})
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
		if _, _, err := tc.k.Security(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("err = %v, want prefix %q", err, tc.want)
		}
	}
}

// TestServeSecurity: the serve keys' files are read into the endpoint's
// TLS (mutual with client_ca) and the forwarding client's, errors naming
// the key; the advertised address derives from serve.addr.
func TestServeSecurity(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	token := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		s    Serve
		want string
	}{
		{Serve{TokenFile: missing}, "serve.token_file"},
		{Serve{TokenFile: empty}, "serve.token_file: " + empty + " is empty"},
		{Serve{TLSCert: pki.certFile, TLSKey: missing}, "serve.tls_cert/tls_key"},
		{Serve{TLSCert: pki.certFile, TLSKey: pki.keyFile, ClientCA: missing}, "serve.client_ca"},
		{Serve{TLSCert: pki.certFile, TLSKey: pki.keyFile, PeerCA: pki.certFile + "x"}, "serve.peer_ca"},
	} {
		if _, err := tc.s.Security(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want prefix %q", tc.s, err, tc.want)
		}
	}
	sec, err := Serve{TLSCert: pki.certFile, TLSKey: pki.keyFile, ClientCA: pki.caFile, TokenFile: token}.Security()
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Token) != "s3cret" || sec.Server.ClientAuth != tls.RequireAndVerifyClientCert || sec.Server.ClientCAs == nil ||
		sec.Client.RootCAs == nil || len(sec.Client.Certificates) != 1 {
		t.Fatalf("security %+v", sec)
	}
	if sec, err := (Serve{TokenFile: token}).Security(); err != nil || sec.Server != nil || sec.Client != nil {
		t.Fatalf("plain HTTP with a token: %+v, %v", sec, err)
	}
	host, _ := os.Hostname()
	for _, tc := range []struct{ s, want string }{
		{"", ""},
		{"10.1.2.3:8081", "10.1.2.3:8081"},
		{":8081", net.JoinHostPort(host, "8081")},
		{"0.0.0.0:8081", net.JoinHostPort(host, "8081")},
	} {
		if got := (Serve{Addr: tc.s}).Advertised(); got != tc.want {
			t.Errorf("Advertised of %q = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := (Serve{Addr: ":8081", AdvertisedAddr: "pod-0.ks:8081"}).Advertised(); got != "pod-0.ks:8081" {
		t.Errorf("advertised_addr ignored: %q", got)
	}
}
