// Package serviceaccount issues and reads ServiceAccount tokens as
// kube-apiserver does: JWTs signed RS256 or ES256, their key named by kube's
// key ID, carrying either the bound claims of a TokenRequest (audiences,
// expiry, the private "kubernetes.io" claim) or the claims of a legacy
// token kept in a Secret.
package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/golang-jwt/jwt/v5"
)

// LegacyIssuer is the issuer of every legacy token, whatever the
// cluster's --service-account-issuer.
const LegacyIssuer = "kubernetes/serviceaccount"

// KeyID is the key ID kube writes in a token's header: the unpadded
// base64url SHA-256 of the public key's DER (PKIX) form. It names the key
// without revealing it.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("failed to serialize public key to DER format: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// Signer signs tokens with one private key.
type Signer struct {
	key    crypto.Signer
	method jwt.SigningMethod
	kid    string
}

// NewSigner signs with key: an RSA key signs RS256, an ECDSA P-256 key
// ES256, the two algorithms kube-apiserver issues.
func NewSigner(key crypto.Signer) (*Signer, error) {
	var m jwt.SigningMethod
	switch k := key.(type) {
	case *rsa.PrivateKey:
		m = jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("serviceaccount: ECDSA keys must use the P-256 curve, not %s", k.Curve.Params().Name)
		}
		m = jwt.SigningMethodES256
	default:
		return nil, fmt.Errorf("serviceaccount: unknown private key type %T, must be *rsa.PrivateKey or *ecdsa.PrivateKey", key)
	}
	kid, err := KeyID(key.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{key: key, method: m, kid: kid}, nil
}

// Public is the key that verifies what s signs.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// Sign signs claims: *Claims or *LegacyClaims.
func (s *Signer) Sign(claims jwt.Claims) (string, error) {
	t := jwt.NewWithClaims(s.method, claims)
	t.Header["kid"] = s.kid
	return t.SignedString(s.key)
}

// errUnsigned is a token none of the keys signed.
var errUnsigned = errors.New("token signature is invalid")

// parse checks token's signature against keys (the one its kid names
// first, then the others, as kube tries every key) and decodes its claims
// into claims. Times are not checked here: the callers check them against
// their own clock.
func parse(token string, keys []crypto.PublicKey, claims jwt.Claims) error {
	p := jwt.NewParser(jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithoutClaimsValidation())
	var lastErr error = errUnsigned
	for _, k := range keys {
		_, err := p.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return k, nil })
		if err == nil {
			return nil
		}
		if !errors.Is(err, jwt.ErrTokenSignatureInvalid) && !errors.Is(err, jwt.ErrTokenUnverifiable) && !errors.Is(err, jwt.ErrInvalidKeyType) {
			return err // malformed: no other key will do better
		}
		lastErr = errUnsigned
	}
	return lastErr
}

// Issuer reads a token's iss claim without checking anything, to tell a
// legacy token from a bound one before verifying it; ok false when the
// text is not a JWT at all.
func Issuer(token string) (iss string, ok bool) {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		return "", false
	}
	return c.Issuer, true
}

// ReadPrivateKey reads a PEM file holding an RSA or ECDSA private key
// (PKCS#1, SEC 1 or PKCS#8), as --service-account-signing-key-file.
func ReadPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		switch block.Type {
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			if s, ok := k.(crypto.Signer); ok {
				return s, nil
			}
			return nil, fmt.Errorf("%s: unsupported private key type %T", path, k)
		}
	}
	return nil, fmt.Errorf("%s: no private key found", path)
}

// ReadPublicKeys reads every public key of a PEM file, as
// --service-account-key-file: public keys, certificates, or private keys
// (whose public halves are taken).
func ReadPublicKeys(path string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []crypto.PublicKey
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		var k crypto.PublicKey
		switch block.Type {
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			k, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var c *x509.Certificate
			if c, err = x509.ParseCertificate(block.Bytes); err == nil {
				k = c.PublicKey
			}
		case "RSA PRIVATE KEY":
			var p *rsa.PrivateKey
			if p, err = x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
				k = p.Public()
			}
		case "EC PRIVATE KEY":
			var p *ecdsa.PrivateKey
			if p, err = x509.ParseECPrivateKey(block.Bytes); err == nil {
				k = p.Public()
			}
		case "PRIVATE KEY":
			var p any
			if p, err = x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
				if s, ok := p.(crypto.Signer); ok {
					k = s.Public()
				}
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if k != nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no public keys found", path)
	}
	return keys, nil
}
