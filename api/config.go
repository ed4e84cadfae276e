package api

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ConfigMaps and Secrets: named bags of keys, each at most 1MiB in all, that
// may be frozen with immutable: true.

var secretFieldLabels = []string{"type"}

const immutableMsg = "field is immutable when `immutable` is set"

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for _, k := range sortedKeys(cm.Data) {
		errs = append(errs, validateDataKey(k, field.NewPath("data").Key(k))...)
		size += len(cm.Data[k])
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		errs = append(errs, validateDataKey(k, field.NewPath("binaryData").Key(k))...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData"), k, "duplicate of key present in data"))
		}
		size += len(cm.BinaryData[k])
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
	}
	return errs
}

func validateConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	if old.Immutable == nil || !*old.Immutable {
		return nil
	}
	var errs field.ErrorList
	if cm.Immutable == nil || !*cm.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMsg))
	}
	if !apiequality.Semantic.DeepEqual(cm.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMsg))
	}
	if !apiequality.Semantic.DeepEqual(cm.BinaryData, old.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableMsg))
	}
	return errs
}

func validateDataKey(key string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fldPath, key, msg))
	}
	return errs
}

// defaultSecret makes a secret Opaque unless it says otherwise, and moves
// stringData, a write-only convenience, into data: it is never stored or
// returned.
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	dataPath := field.NewPath("data")
	var errs field.ErrorList
	size := 0
	for _, k := range sortedKeys(s.Data) {
		errs = append(errs, validateDataKey(k, dataPath.Key(k))...)
		size += len(s.Data[k])
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", corev1.MaxSecretSize))
	}

	require := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				errs = append(errs, field.Required(dataPath.Key(k), ""))
			}
		}
	}
	requireJSON := func(key string) {
		require(key)
		if v, ok := s.Data[key]; ok && !json.Valid(v) {
			errs = append(errs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", "must be valid JSON"))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		requireJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		requireJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			require(corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		require(corev1.SSHAuthPrivateKey)
	case corev1.SecretTypeTLS:
		require(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return errs
}

func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))
	if old.Immutable == nil || !*old.Immutable {
		return errs
	}
	if s.Immutable == nil || !*s.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMsg))
	}
	if !apiequality.Semantic.DeepEqual(s.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMsg))
	}
	return errs
}

func secretFields(s *corev1.Secret) fields.Set {
	return fields.Set{"type": string(s.Type)}
}
