package signing

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Signature algorithms and media types of OCM's RSA signing handler (OCM bindings/go/rsa/signing/v1alpha1
// pss.go, pkcs1v15.go, encoding_policy_pem.go).
const (
	AlgorithmRSASSAPSS      = "RSASSA-PSS"
	AlgorithmRSASSAPKCS1V15 = "RSASSA-PKCS1-V1_5"

	// MediaTypePEM: the value is a PEM block of type SIGNATURE, its algorithm in the "Signature Algorithm"
	// header, optionally followed by the signer's certificate chain.
	MediaTypePEM = "application/x-pem-file"
	// MediaTypeRSAPSS and MediaTypeRSA: the value is the signature in hex.
	MediaTypeRSAPSS = "application/vnd.ocm.signature.rsa.pss"
	MediaTypeRSA    = "application/vnd.ocm.signature.rsa"

	pemBlockSignature   = "SIGNATURE"
	pemBlockCertificate = "CERTIFICATE"
	pemHeaderAlgorithm  = "Signature Algorithm"
)

// Errors Verify wraps; callers map them to condition reasons.
var (
	// ErrSignatureMissing: a required signature is not in the descriptor, or none can be checked with the keys.
	ErrSignatureMissing = errors.New("signature missing")
	// ErrSignatureInvalid: a signature does not verify, or its digest does not match the descriptor.
	ErrSignatureInvalid = errors.New("signature invalid")
)

// Signature is an element of a descriptor's signatures.
type Signature struct {
	Name      string        `json:"name"`
	Digest    v2Digest      `json:"digest"`
	Signature SignatureInfo `json:"signature"`
	Timestamp any           `json:"timestamp,omitempty"`
}

// SignatureInfo is the signature proper.
type SignatureInfo struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
	MediaType string `json:"mediaType"`
	Issuer    string `json:"issuer,omitempty"`
}

// Signatures returns the signatures of a descriptor (JSON).
func Signatures(descriptor []byte) ([]Signature, error) {
	var d struct {
		Signatures []Signature `json:"signatures"`
	}
	if err := json.Unmarshal(descriptor, &d); err != nil {
		return nil, fmt.Errorf("decoding signatures: %w", err)
	}
	return d.Signatures, nil
}

// Signed is what verifying a descriptor's signatures needs of it: the signatures, and the digest of the descriptor
// under each normalisation they name. It keeps no copy of the descriptor, so a verified or cached descriptor costs
// its signatures, not its bytes.
type Signed struct {
	Signatures []Signature
	digests    map[v2Digest]digestOutcome // by algorithms, Value unset
}

// digestOutcome is a descriptor's digest under one pair of algorithms, or why it has none.
type digestOutcome struct {
	value string
	err   error
}

// Prepare reads a descriptor's (JSON) signatures and digests it under the algorithms they name.
func Prepare(descriptor []byte) (*Signed, error) {
	signatures, err := Signatures(descriptor)
	if err != nil {
		return nil, err
	}
	s := &Signed{Signatures: signatures, digests: map[v2Digest]digestOutcome{}}
	for i, sig := range signatures {
		signatures[i].Timestamp = nil // not verified, and of any size
		algorithms := v2Digest{HashAlgorithm: sig.Digest.HashAlgorithm, NormalisationAlgorithm: sig.Digest.NormalisationAlgorithm}
		if _, done := s.digests[algorithms]; !done {
			value, err := Digest(descriptor, algorithms.NormalisationAlgorithm, algorithms.HashAlgorithm)
			s.digests[algorithms] = digestOutcome{value: value, err: err}
		}
	}
	return s, nil
}

// RetainedBytes estimates the heap s keeps alive, for caches bounded in bytes; 0 for a nil Signed.
func (s *Signed) RetainedBytes() int64 {
	if s == nil {
		return 0
	}
	// A string header, and a map entry beyond its contents.
	const stringBytes, entryBytes = 16, 48
	size := int64(reflect.TypeFor[Signature]().Size()) //nolint:gosec // G115: a struct of a few hundred bytes
	n := int64(cap(s.Signatures)) * size
	for _, sig := range s.Signatures {
		n += int64(len(sig.Name) + len(sig.Digest.HashAlgorithm) + len(sig.Digest.NormalisationAlgorithm) + len(sig.Digest.Value) +
			len(sig.Signature.Algorithm) + len(sig.Signature.Value) + len(sig.Signature.MediaType) + len(sig.Signature.Issuer))
	}
	for algorithms, d := range s.digests {
		n += entryBytes + 5*stringBytes + int64(len(algorithms.HashAlgorithm)+len(algorithms.NormalisationAlgorithm)+len(d.value))
	}
	return n
}

// Verify checks a descriptor's signatures against trusted keys; see Signed.Verify.
func Verify(descriptor []byte, names []string, keys Keys) ([]string, error) {
	s, err := Prepare(descriptor)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignatureInvalid, err)
	}
	return s.Verify(names, keys)
}

// Verify checks the signatures against trusted keys. With names, each named signature must be present and verify
// with the key of its name (or the key under AnyName). Without, every signature that has a key of its own name
// must verify, signatures only AnyName's key applies to are tried, and at least one must verify. It returns the
// names verified. A nil Signed has no signatures.
func (s *Signed) Verify(names []string, keys Keys) ([]string, error) {
	var signatures []Signature
	if s != nil {
		signatures = s.Signatures
	}
	var (
		verified []string
		tried    error // the last failure of a signature only AnyName's key applied to
	)
	for _, sig := range signatures {
		key, ok := keys.lookup(sig.Name)
		if !ok || (len(names) > 0 && !slices.Contains(names, sig.Name)) {
			continue
		}
		if err := s.verifySignature(sig, key); err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrSignatureInvalid, sig.Name, err)
			if _, own := keys[sig.Name]; own || len(names) > 0 {
				return nil, err
			}
			tried = err
			continue
		}
		verified = append(verified, sig.Name)
	}
	for _, name := range names {
		if !slices.Contains(verified, name) {
			if _, ok := keys.lookup(name); !ok {
				return nil, fmt.Errorf("%w: no public key for signature %q", ErrSignatureMissing, name)
			}
			return nil, fmt.Errorf("%w: the descriptor has no signature %q", ErrSignatureMissing, name)
		}
	}
	switch {
	case len(verified) > 0:
		return verified, nil
	case tried != nil:
		return nil, tried
	}
	return nil, fmt.Errorf("%w: none of the descriptor's %d signature(s) has a trusted key (%s)", ErrSignatureMissing, len(signatures), keys)
}

// verifySignature compares the descriptor's digest under the signature's algorithms with the signed digest, and
// checks the signature over that digest (OCM signs the digest bytes with the hash named by it).
func (s *Signed) verifySignature(sig Signature, key TrustedKey) error {
	d := s.digests[v2Digest{HashAlgorithm: sig.Digest.HashAlgorithm, NormalisationAlgorithm: sig.Digest.NormalisationAlgorithm}]
	if d.err != nil {
		return d.err
	}
	if d.value != sig.Digest.Value {
		return fmt.Errorf("the descriptor's %s digest is %s, the signature signs %s", sig.Digest.NormalisationAlgorithm, d.value, sig.Digest.Value)
	}
	raw, algorithm, chain, err := decodeSignatureValue(sig.Signature)
	if err != nil {
		return err
	}
	pub, err := key.signerKey(chain, sig.Signature.Issuer)
	if err != nil {
		return err
	}
	// Whichever key signs, a signer certificate's as well as a trusted one: its size bounds the time verification takes.
	if err := checkKeySize(pub); err != nil {
		return err
	}
	hashed, _ := hex.DecodeString(d.value) // Digest returns hex
	switch algorithm {
	case AlgorithmRSASSAPSS:
		err = rsa.VerifyPSS(pub, crypto.SHA256, hashed, raw, nil)
	case AlgorithmRSASSAPKCS1V15:
		err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, hashed, raw)
	default:
		return fmt.Errorf("unsupported signature algorithm %q", algorithm)
	}
	if err != nil {
		return fmt.Errorf("%s signature does not verify with the trusted key", algorithm)
	}
	return nil
}

// decodeSignatureValue returns the raw signature, its algorithm and any certificate chain PEM carries after it.
// The algorithm named by the media type or PEM header must agree with the declared one.
func decodeSignatureValue(info SignatureInfo) ([]byte, string, []*x509.Certificate, error) {
	var (
		raw       []byte
		algorithm string
		chain     []*x509.Certificate
		err       error
	)
	switch info.MediaType {
	case MediaTypeRSAPSS, MediaTypeRSA:
		algorithm = AlgorithmRSASSAPSS
		if info.MediaType == MediaTypeRSA {
			algorithm = AlgorithmRSASSAPKCS1V15
		}
		if raw, err = hex.DecodeString(info.Value); err != nil {
			return nil, "", nil, fmt.Errorf("signature value is not hex: %w", err)
		}
	case MediaTypePEM:
		if raw, algorithm, chain, err = decodePEMSignature(info.Value); err != nil {
			return nil, "", nil, err
		}
	default:
		return nil, "", nil, fmt.Errorf("unsupported signature media type %q", info.MediaType)
	}
	switch {
	case algorithm == "":
		algorithm = info.Algorithm
	case info.Algorithm != "" && info.Algorithm != algorithm:
		return nil, "", nil, fmt.Errorf("signature algorithm %q disagrees with its encoding's %q", info.Algorithm, algorithm)
	}
	return raw, algorithm, chain, nil
}

func decodePEMSignature(value string) ([]byte, string, []*x509.Certificate, error) {
	block, rest := pem.Decode([]byte(value))
	if block == nil || block.Type != pemBlockSignature {
		return nil, "", nil, errors.New("signature value is not a PEM SIGNATURE block")
	}
	var chain []*x509.Certificate
	for {
		var cert *pem.Block
		if cert, rest = pem.Decode(rest); cert == nil {
			break
		}
		if cert.Type != pemBlockCertificate {
			return nil, "", nil, fmt.Errorf("unexpected PEM block %q after the signature", cert.Type)
		}
		c, err := x509.ParseCertificate(cert.Bytes)
		if err != nil {
			return nil, "", nil, fmt.Errorf("certificate after the signature: %w", err)
		}
		chain = append(chain, c)
	}
	return block.Bytes, block.Headers[pemHeaderAlgorithm], chain, nil
}

// SignOptions choose how Sign signs.
type SignOptions struct {
	Algorithm     string // default RSASSA-PSS
	MediaType     string // default application/x-pem-file; MediaTypeRSA(PSS) write hex
	Normalisation string // default jsonNormalisation/v4alpha1
	// Certificate, when set, is appended to a PEM signature and its subject becomes the issuer.
	Certificate *x509.Certificate
}

// Sign adds a signature named name to a descriptor (JSON) and returns the signed descriptor. It replaces a
// signature of the same name, as OCM does when re-signing.
func Sign(descriptor []byte, name string, key *rsa.PrivateKey, opts SignOptions) ([]byte, error) {
	opts.defaults()
	digest, err := Digest(descriptor, opts.Normalisation, HashSHA256)
	if err != nil {
		return nil, err
	}
	hashed, _ := hex.DecodeString(digest) // Digest returns hex
	var raw []byte
	switch opts.Algorithm {
	case AlgorithmRSASSAPSS:
		raw, err = rsa.SignPSS(rand.Reader, key, crypto.SHA256, hashed, nil)
	case AlgorithmRSASSAPKCS1V15:
		raw, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, hashed)
	default:
		err = fmt.Errorf("unsupported signature algorithm %q", opts.Algorithm)
	}
	if err != nil {
		return nil, err
	}
	sig := Signature{
		Name:      name,
		Digest:    v2Digest{HashAlgorithm: HashSHA256, NormalisationAlgorithm: opts.Normalisation, Value: digest},
		Signature: SignatureInfo{Algorithm: opts.Algorithm, MediaType: opts.MediaType, Value: hex.EncodeToString(raw)},
	}
	if opts.MediaType == MediaTypePEM {
		sig.Signature.Value = pemSignature(opts.Algorithm, raw, opts.Certificate)
		if opts.Certificate != nil {
			sig.Signature.Issuer = opts.Certificate.Subject.String()
		}
	}
	return withSignature(descriptor, sig)
}

func (o *SignOptions) defaults() {
	if o.Algorithm == "" {
		o.Algorithm = AlgorithmRSASSAPSS
	}
	if o.MediaType == "" {
		o.MediaType = MediaTypePEM
	}
	if o.Normalisation == "" {
		o.Normalisation = NormalisationV4alpha1
	}
}

func pemSignature(algorithm string, raw []byte, cert *x509.Certificate) string {
	var b strings.Builder
	b.Write(pem.EncodeToMemory(&pem.Block{Type: pemBlockSignature, Headers: map[string]string{pemHeaderAlgorithm: algorithm}, Bytes: raw}))
	if cert != nil {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: pemBlockCertificate, Bytes: cert.Raw}))
	}
	return b.String()
}

// withSignature sets the signature in the descriptor, leaving every other field as it was.
func withSignature(descriptor []byte, sig Signature) ([]byte, error) {
	var d map[string]json.RawMessage
	if err := json.Unmarshal(descriptor, &d); err != nil {
		return nil, fmt.Errorf("decoding component descriptor: %w", err)
	}
	signatures, err := Signatures(descriptor)
	if err != nil {
		return nil, err
	}
	signatures = slices.DeleteFunc(signatures, func(s Signature) bool { return s.Name == sig.Name })
	if d["signatures"], err = json.Marshal(append(signatures, sig)); err != nil {
		return nil, err
	}
	return json.Marshal(d)
}
