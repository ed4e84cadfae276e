package api

import (
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodLogOptionsFromQuery reads a pods/log request's query (and the
// kubelet's /containerLogs one) into PodLogOptions, as kube's parameter
// codec does: a boolean is true unless absent, "0" or "false"; a number
// is a decimal integer; sinceTime is RFC 3339. The error says which value
// did not parse.
func PodLogOptionsFromQuery(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{
		Container:                    q.Get("container"),
		Follow:                       queryBool(q, "follow"),
		Previous:                     queryBool(q, "previous"),
		Timestamps:                   queryBool(q, "timestamps"),
		InsecureSkipTLSVerifyBackend: queryBool(q, "insecureSkipTLSVerifyBackend"),
	}
	for _, p := range []struct {
		name string
		to   **int64
	}{{"sinceSeconds", &o.SinceSeconds}, {"tailLines", &o.TailLines}, {"limitBytes", &o.LimitBytes}} {
		v, ok := q[p.name]
		if !ok || len(v) == 0 {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return nil, err
		}
		*p.to = &n
	}
	if v := q.Get("sinceTime"); v != "" {
		var t metav1.Time
		if err := t.UnmarshalQueryParameter(v); err != nil {
			return nil, err
		}
		o.SinceTime = &t
	}
	if v := q.Get("stream"); v != "" {
		o.Stream = &v
	}
	return o, nil
}

func queryBool(q url.Values, name string) bool {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// PodLogOptionsQuery is the query that asks a kubelet for what o asks, as
// kube-apiserver writes it: only what is set, sinceTime in RFC 3339.
func PodLogOptionsQuery(o *corev1.PodLogOptions) url.Values {
	q := url.Values{}
	for _, b := range []struct {
		name string
		set  bool
	}{{"follow", o.Follow}, {"previous", o.Previous}, {"timestamps", o.Timestamps}} {
		if b.set {
			q.Set(b.name, "true")
		}
	}
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	return q
}

// ValidatePodLogOptions is kube's: tailLines not negative, limitBytes and
// sinceSeconds positive, at most one of sinceSeconds and sinceTime, and a
// stream, if named, one there is.
func ValidatePodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.Stream != nil {
		switch *o.Stream {
		case corev1.LogStreamStdout, corev1.LogStreamStderr, corev1.LogStreamAll:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("stream"), *o.Stream,
				[]string{corev1.LogStreamAll, corev1.LogStreamStderr, corev1.LogStreamStdout}))
		}
	}
	return errs
}
