package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is who a component is to the API server: a static token of a user in groups. The names are those
// Kubernetes' bootstrap RBAC and the Node authorizer know.
type identity struct {
	file, user string
	groups     []string
}

// nodeName is the Node the kubelet registers.
const nodeName = "node"

var identities = []identity{
	{"admin", "admin", []string{"system:masters"}},
	{kubelet, "system:node:" + nodeName, []string{"system:nodes"}},
	{kubeProxy, "system:kube-proxy", nil},
	{kubeControllerManager, "system:kube-controller-manager", nil},
	{kubeScheduler, "system:kube-scheduler", nil},
}

// pki writes into dir/pki a CA, the API server's serving certificate (valid for NodeIP, the kubernetes Service's
// ClusterIP and its names), the service-account signing key, a token file with one token per identity, and a
// kubeconfig per identity into dir/etc. It returns the CA certificate.
func pki(dir string) (caPEM []byte, err error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fluxdeployer-node-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: kubeAPIServer},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(NodeIP), net.ParseIP(APIServiceIP), net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, serving, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":        caPEM,
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		"sa.pub":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for name, key := range map[string]*ecdsa.PrivateKey{"apiserver.key": servingKey, "sa.key": saKey} {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	var tokens strings.Builder
	for i, id := range identities {
		token, err := randomToken()
		if err != nil {
			return nil, err
		}
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&tokens, "%s,%s,%d,%q\n", token, id.user, i+1, strings.Join(id.groups, ","))
		if err := writeKubeconfig(filepath.Join(dir, "etc", id.file+".kubeconfig"), caPEM, id.user, token); err != nil {
			return nil, err
		}
	}
	files["tokens.csv"] = []byte(tokens.String())
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(pkiDir, name), body, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeKubeconfig writes a kubeconfig for the API server at NodeIP, authenticating with a bearer token.
func writeKubeconfig(path string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["node"] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(NodeIP, apiPort), CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: user}
	cfg.CurrentContext = "node"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}
