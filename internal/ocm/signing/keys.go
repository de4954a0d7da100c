package signing

import (
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// AnyName is the Keys entry that verifies a signature of any name, e.g. the CLI's --public-key without
// --signature.
const AnyName = ""

// Keys are trusted keys by signature name.
type Keys map[string]TrustedKey

func (k Keys) lookup(name string) (TrustedKey, bool) {
	if key, ok := k[name]; ok {
		return key, true
	}
	key, ok := k[AnyName]
	return key, ok
}

// String lists the names keys are held for, for messages.
func (k Keys) String() string {
	names := slices.Sorted(maps.Keys(k))
	for i, n := range names {
		if n == AnyName {
			names[i] = "any name"
		}
	}
	return "keys for " + strings.Join(names, ", ")
}

// TrustedKey is an RSA public key, or a certificate whose key signs and whose subject a signature's issuer names.
type TrustedKey struct {
	PublicKey   *rsa.PublicKey
	Certificate *x509.Certificate
}

// The RSA key sizes accepted, in bits. Below 2048 a key is too weak to trust (NIST SP 800-131A). Above 8192 it
// buys no security anyone uses and costs verification time that grows with the square of the size and cannot be
// cancelled: a 512-kbit key in a tenant's Secret took ~7 s of CPU per verification, on every reconcile.
const (
	MinRSAKeyBits = 2048
	MaxRSAKeyBits = 8192
)

// ErrKeyRejected is wrapped by the errors of a key of a kind or size that is not accepted; callers map it to a
// condition reason.
var ErrKeyRejected = errors.New("key rejected")

// checkKeySize refuses an RSA key outside MinRSAKeyBits–MaxRSAKeyBits.
func checkKeySize(pub *rsa.PublicKey) error {
	if bits := pub.N.BitLen(); bits < MinRSAKeyBits || bits > MaxRSAKeyBits {
		return fmt.Errorf("%w: a %d-bit RSA key, want %d to %d bits", ErrKeyRejected, bits, MinRSAKeyBits, MaxRSAKeyBits)
	}
	return nil
}

// ParseTrustedKey reads a PEM public key (PKIX "PUBLIC KEY" or PKCS #1 "RSA PUBLIC KEY") or certificate, of an RSA
// key of MinRSAKeyBits to MaxRSAKeyBits (ErrKeyRejected otherwise).
func ParseTrustedKey(data []byte) (TrustedKey, error) {
	key, err := parseTrustedKey(data)
	if err != nil {
		return TrustedKey{}, err
	}
	if err := checkKeySize(key.PublicKey); err != nil {
		return TrustedKey{}, err
	}
	return key, nil
}

func parseTrustedKey(data []byte) (TrustedKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return TrustedKey{}, errors.New("no PEM block")
	}
	switch block.Type {
	case pemBlockCertificate:
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return TrustedKey{}, err
		}
		pub, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return TrustedKey{}, fmt.Errorf("%w: certificate %s has no RSA key", ErrKeyRejected, cert.Subject)
		}
		return TrustedKey{PublicKey: pub, Certificate: cert}, nil
	case "RSA PUBLIC KEY":
		pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
		return TrustedKey{PublicKey: pub}, err
	case "PUBLIC KEY":
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return TrustedKey{}, err
		}
		rsaPub, ok := pub.(*rsa.PublicKey)
		if !ok {
			return TrustedKey{}, fmt.Errorf("%w: not an RSA public key", ErrKeyRejected)
		}
		return TrustedKey{PublicKey: rsaPub}, nil
	}
	return TrustedKey{}, fmt.Errorf("PEM block %q is neither a public key nor a certificate", block.Type)
}

// ParseKeys reads trusted keys by signature name, e.g. from a Secret's data.
func ParseKeys(data map[string][]byte) (Keys, error) {
	keys := make(Keys, len(data))
	for name, pemData := range data {
		key, err := ParseTrustedKey(pemData)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", name, err)
		}
		keys[name] = key
	}
	return keys, nil
}

// signerKey returns the key a signature is checked with.
//
// A plain public key is used as it is, whatever certificates the signature carries (key pinning; OCM v1's RSA
// handler did the same). A certificate is used as OCM v1 used it: its key verifies, and a signature that names an
// issuer must name the certificate's subject. When the signature carries a chain whose leaf is another
// certificate, the leaf must chain up to the trusted certificate for code signing, as current OCM requires; the
// issuer may then name the leaf's issuer (current OCM) or the leaf itself (OCM v1 wrote the signer's subject).
func (k TrustedKey) signerKey(chain []*x509.Certificate, issuer string) (*rsa.PublicKey, error) {
	if k.Certificate == nil {
		return k.PublicKey, nil
	}
	if len(chain) == 0 || chain[0].Equal(k.Certificate) {
		if err := matchIssuer(issuer, k.Certificate.Subject); err != nil {
			return nil, err
		}
		return k.PublicKey, nil
	}
	leaf := chain[0]
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(k.Certificate)
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, CurrentTime: time.Now()}); err != nil {
		return nil, fmt.Errorf("signer certificate %s: %w", leaf.Subject, err)
	}
	if matchIssuer(issuer, leaf.Subject) != nil {
		if err := matchIssuer(issuer, leaf.Issuer); err != nil {
			return nil, err
		}
	}
	pub, ok := leaf.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("signer certificate %s has no RSA key", leaf.Subject)
	}
	return pub, nil
}

// matchIssuer checks an issuer distinguished name (RFC 2253 string, e.g. "CN=signer,O=acme") against a
// certificate name: every attribute the issuer gives must be the name's, as OCM v1's MatchDN requires. An empty
// issuer names nothing to check.
func matchIssuer(issuer string, name pkix.Name) error {
	if strings.TrimSpace(issuer) == "" {
		return nil
	}
	have := map[string][]string{}
	for _, rdn := range name.ToRDNSequence() {
		for _, atv := range rdn {
			have[atv.Type.String()] = append(have[atv.Type.String()], fmt.Sprint(atv.Value))
		}
	}
	for _, part := range splitDN(issuer) {
		typ, value, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("issuer %q is not a distinguished name", issuer)
		}
		oid, known := dnAttributes[strings.ToUpper(strings.TrimSpace(typ))]
		if !known {
			oid = strings.TrimSpace(typ)
		}
		if !slices.Contains(have[oid], strings.TrimSpace(value)) {
			return fmt.Errorf("the signature's issuer %q does not match the certificate's %q", issuer, name)
		}
	}
	return nil
}

// dnAttributes maps the RFC 2253 attribute keywords to the OIDs pkix names carry.
var dnAttributes = map[string]string{
	"CN": "2.5.4.3", "SERIALNUMBER": "2.5.4.5", "C": "2.5.4.6", "L": "2.5.4.7", "ST": "2.5.4.8",
	"STREET": "2.5.4.9", "O": "2.5.4.10", "OU": "2.5.4.11", "POSTALCODE": "2.5.4.17",
}

// splitDN splits an RFC 2253 string at unescaped commas (and the '+' of multi-valued names), unescaping values.
func splitDN(dn string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(dn); i++ {
		switch c := dn[i]; {
		case c == '\\' && i+1 < len(dn):
			i++
			cur.WriteByte(dn[i])
		case c == ',' || c == '+' || c == ';':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String())
}
