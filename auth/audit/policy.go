// Package audit is kube-apiserver's audit log: the audit.k8s.io/v1
// Policy that says how much of each request is recorded, the Event that
// records it, and a writer of Events as JSON lines (--audit-log-path).
package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/auth/authorizer"
)

// Level is how much of a request an Event records.
type Level string

const (
	// LevelNone records nothing.
	LevelNone Level = "None"
	// LevelMetadata records who asked what and the answer's status, but no
	// bodies: never a Secret's data or a token a review carries.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the request's body.
	LevelRequest Level = "Request"
	// LevelRequestResponse adds the response's body too.
	LevelRequestResponse Level = "RequestResponse"
)

var levels = []Level{LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse}

// Less reports whether l records less than o.
func (l Level) Less(o Level) bool { return slices.Index(levels, l) < slices.Index(levels, o) }

// Stage is the point in a request's life an Event is written at.
type Stage string

const (
	// StageRequestReceived: as soon as the request is read, before it is
	// handled.
	StageRequestReceived Stage = "RequestReceived"
	// StageResponseStarted: when the headers of a long-running request's
	// answer (a watch) are sent, before its body.
	StageResponseStarted Stage = "ResponseStarted"
	// StageResponseComplete: when the answer is sent.
	StageResponseComplete Stage = "ResponseComplete"
	// StagePanic: when handling the request panicked.
	StagePanic Stage = "Panic"
)

var stages = []Stage{StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic}

// Policy is kube's audit.k8s.io/v1 Policy: the first rule a request
// matches gives its level; a request no rule matches is not recorded.
type Policy struct {
	APIVersion string       `json:"apiVersion,omitempty"`
	Kind       string       `json:"kind,omitempty"`
	Rules      []PolicyRule `json:"rules"`
	// OmitStages are never recorded, whatever the rule.
	OmitStages []Stage `json:"omitStages,omitempty"`
	// OmitManagedFields drops metadata.managedFields from the bodies
	// recorded, unless the rule says otherwise.
	OmitManagedFields bool `json:"omitManagedFields,omitempty"`
}

// PolicyRule matches requests by user, group, verb, resource, namespace or
// path; every list that is set must match, and an empty one matches all.
type PolicyRule struct {
	Level      Level    `json:"level"`
	Users      []string `json:"users,omitempty"`
	UserGroups []string `json:"userGroups,omitempty"`
	Verbs      []string `json:"verbs,omitempty"`
	// Resources and Namespaces match resource requests only;
	// NonResourceURLs ("/healthz", "/apis*") only the others.
	Resources         []GroupResources `json:"resources,omitempty"`
	Namespaces        []string         `json:"namespaces,omitempty"`
	NonResourceURLs   []string         `json:"nonResourceURLs,omitempty"`
	OmitStages        []Stage          `json:"omitStages,omitempty"`
	OmitManagedFields *bool            `json:"omitManagedFields,omitempty"`
}

// GroupResources are resources of one API group: "pods",
// "pods/log", "*/status", "deployments/*", "*", limited to ResourceNames
// when any are given.
type GroupResources struct {
	Group         string   `json:"group"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// DefaultPolicy records every request at the Metadata level: who asked
// what, and how it was answered, but no bodies.
func DefaultPolicy() *Policy {
	return &Policy{APIVersion: "audit.k8s.io/v1", Kind: "Policy", Rules: []PolicyRule{{Level: LevelMetadata}}}
}

// LoadPolicyFile reads a Policy from a YAML or JSON file
// (--audit-policy-file).
func LoadPolicyFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading audit policy file: %w", err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("loading audit policy file %q: %w", path, err)
	}
	return p, nil
}

// ParsePolicy decodes and validates a Policy in YAML or JSON. Unknown
// fields are refused, so that a misspelt rule is not silently dropped.
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("failed decoding: %w", err)
	}
	if p.Kind != "Policy" || (p.APIVersion != "audit.k8s.io/v1") {
		return nil, fmt.Errorf("failed decoding: want apiVersion audit.k8s.io/v1 and kind Policy, got %q %q", p.APIVersion, p.Kind)
	}
	if errs := validatePolicy(&p); len(errs) > 0 {
		return nil, fmt.Errorf("validating policy: %w", errs.ToAggregate())
	}
	if len(p.Rules) == 0 {
		return nil, errors.New("loaded illegal policy with 0 rules")
	}
	return &p, nil
}

func validatePolicy(p *Policy) field.ErrorList {
	errs := validateStages(p.OmitStages, field.NewPath("omitStages"))
	for i, r := range p.Rules {
		path := field.NewPath("rules").Index(i)
		if !slices.Contains(levels, r.Level) {
			errs = append(errs, field.NotSupported(path.Child("level"), r.Level, levelStrings()))
		}
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		for j, u := range r.NonResourceURLs {
			if u == "" {
				errs = append(errs, field.Invalid(path.Child("nonResourceURLs").Index(j), u, "must not be empty"))
			} else if i := strings.Index(u, "*"); i >= 0 && i != len(u)-1 {
				errs = append(errs, field.Invalid(path.Child("nonResourceURLs").Index(j), u, "non-resource URL wildcards '*' must be the final character"))
			}
		}
		for j, gr := range r.Resources {
			grPath := path.Child("resources").Index(j)
			if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
				errs = append(errs, field.Invalid(grPath.Child("resourceNames"), gr.ResourceNames, "using resourceNames requires at least one resource"))
			}
			for k, res := range gr.Resources {
				if strings.Contains(res, "*") && res != "*" && !strings.HasPrefix(res, "*/") && !strings.HasSuffix(res, "/*") {
					errs = append(errs, field.Invalid(grPath.Child("resources").Index(k), res, "wildcards are only allowed as '*', '*/subresource' or 'resource/*'"))
				}
			}
		}
		errs = append(errs, validateStages(r.OmitStages, path.Child("omitStages"))...)
	}
	return errs
}

func validateStages(ss []Stage, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range ss {
		if !slices.Contains(stages, s) {
			valid := make([]string, len(stages))
			for i, s := range stages {
				valid[i] = string(s)
			}
			errs = append(errs, field.NotSupported(path.Index(i), s, valid))
		}
	}
	return errs
}

func levelStrings() []string {
	out := make([]string, len(levels))
	for i, l := range levels {
		out[i] = string(l)
	}
	return out
}

// Decision is what the policy says of one request.
type Decision struct {
	Level             Level
	OmitStages        []Stage
	OmitManagedFields bool
}

// Omits reports whether stage is not to be recorded.
func (d Decision) Omits(stage Stage) bool { return slices.Contains(d.OmitStages, stage) }

// Evaluate finds the first rule a matches: its level, the stages it and
// the policy omit, and whether managed fields are dropped. A request no
// rule matches is at LevelNone. A nil policy records nothing.
func (p *Policy) Evaluate(a authorizer.Attributes) Decision {
	if p == nil {
		return Decision{Level: LevelNone}
	}
	for _, r := range p.Rules {
		if !r.matches(a) {
			continue
		}
		d := Decision{Level: r.Level, OmitManagedFields: p.OmitManagedFields}
		d.OmitStages = append(slices.Clone(p.OmitStages), r.OmitStages...)
		if r.OmitManagedFields != nil {
			d.OmitManagedFields = *r.OmitManagedFields
		}
		return d
	}
	return Decision{Level: LevelNone, OmitStages: p.OmitStages}
}

func (r *PolicyRule) matches(a authorizer.Attributes) bool {
	if len(r.Users) > 0 && (a.User == nil || !slices.Contains(r.Users, a.User.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if a.User == nil || !slices.ContainsFunc(a.User.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) }) {
			return false
		}
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return r.matchesResource(a)
	}
	if len(r.NonResourceURLs) > 0 {
		if a.ResourceRequest {
			return false
		}
		return slices.ContainsFunc(r.NonResourceURLs, func(spec string) bool { return pathMatches(a.Path, spec) })
	}
	return true
}

// matchesResource: the namespace ("" for a cluster-scoped resource) and
// the group, resource or subresource, and name.
func (r *PolicyRule) matchesResource(a authorizer.Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, a.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == "*" || res == combined:
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && res[2:] == a.Subresource:
				return true
			case strings.HasSuffix(res, "/*") && res[:len(res)-2] == a.Resource:
				return true
			}
		}
	}
	return false
}

// pathMatches: "*" is every path, "/apis*" every path that begins so.
func pathMatches(path, spec string) bool {
	if spec == "*" || spec == path {
		return true
	}
	prefix, ok := strings.CutSuffix(spec, "*")
	return ok && strings.HasPrefix(path, prefix)
}
