package apiserver

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/api"
)

// Server-side apply is a PATCH whose body (application/apply-patch+yaml;
// JSON is YAML) is the writer's whole intent for the fields it names, as
// kube-apiserver serves it:
//
//   - ?fieldManager= is required, and ?force= is for apply only (422);
//   - the configuration is merged into the live object by its type's
//     shape; a field another manager set to another value is a conflict
//     (409, each field and manager named) unless force=true, which takes
//     it over; a field the manager applied before and no longer names is
//     removed, unless another manager owns it too;
//   - an apply that changes nothing writes nothing (the resourceVersion
//     stays);
//   - applying to an object that does not exist creates it, through the
//     create path (admission, quota, validation); 201 Created;
//   - the result passes the update path like any other write (admission,
//     validation, compare-and-swap), and dryRun writes nothing.

// isApply reports whether a PATCH is a server-side apply.
func isApply(r *http.Request) bool {
	mt := types.PatchType(mediaType(r))
	return mt == types.ApplyYAMLPatchType || mt == types.ApplyCBORPatchType
}

// patchOptions reads and checks a PATCH's fieldManager and force, as
// kube-apiserver's ValidatePatchOptions does: 422 Invalid PatchOptions.
// It returns force.
func patchOptions(r *http.Request) (bool, error) {
	q := r.URL.Query()
	opts := &metav1.PatchOptions{FieldManager: q.Get("fieldManager")}
	force := false
	if v, ok := q["force"]; ok && len(v) > 0 {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return false, apierrors.NewBadRequest(fmt.Sprintf("invalid force %q: %v", v[0], err))
		}
		force, opts.Force = b, &b
	}
	patchType := types.PatchType(mediaType(r))
	if errs := metav1validation.ValidatePatchOptions(opts, patchType); len(errs) > 0 {
		return false, apierrors.NewInvalid(schemaGroupKindOf(metav1.GroupName, "PatchOptions"), "", errs)
	}
	return force, nil
}

// readApply reads an apply configuration: YAML (or JSON) of one object.
// The configuration is shared (see applyConfigCache): the caller copies
// it before changing anything.
func (s *Server) readApply(r *http.Request, fv fieldValidation) (*applyConfig, error) {
	if types.PatchType(mediaType(r)) == types.ApplyCBORPatchType {
		return nil, newUnsupportedMediaType(mediaType(r), append(patchMediaTypes, string(types.ApplyYAMLPatchType)))
	}
	body, err := readBody(r, s.maxBody)
	if err != nil {
		return nil, err
	}
	cfg := s.applyConfigs.get(body)
	if cfg == nil {
		if cfg, err = s.parseApply(body); err != nil {
			return nil, err
		}
		s.applyConfigs.put(cfg)
	}
	if fv == fieldStrict || fv == fieldWarn {
		if err := cfg.strictErr; err != nil {
			if fv == fieldStrict {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
			}
			addWarning(r.Context(), err.Error())
		}
	}
	return cfg, nil
}

// applyConfig is one apply configuration, parsed.
type applyConfig struct {
	body  string                     // as the client sent it
	sum   [sha256.Size]byte          // the body's SHA-256, which names it in applyNoops
	patch *unstructured.Unstructured // the object it names; never changed
	// strictErr is what strict decoding of the body finds (duplicate
	// fields), nil if nothing.
	strictErr error
}

// parseApply parses an apply configuration's body.
func (s *Server) parseApply(body []byte) (*applyConfig, error) {
	data, err := s.toJSON("application/yaml", body)
	if err != nil {
		return nil, err
	}
	patch := &unstructured.Unstructured{Object: map[string]any{}}
	if err := utiljson.Unmarshal(data, &patch.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	return &applyConfig{
		body: string(body), sum: sha256.Sum256(body), patch: patch,
		strictErr: yaml.UnmarshalStrict(body, &map[string]any{}),
	}, nil
}

// applyConfigCache keeps the apply configurations last parsed, by their
// bytes. A controller or a GitOps loop applies the same configuration
// again and again; turning its YAML into an object (YAML to JSON, JSON
// to maps, and the strict parse that looks for duplicate fields) was a
// fifth of an unchanged apply's allocations. Parsing is a function of the
// bytes alone, so a configuration parsed once serves every apply of the
// same bytes. Only small bodies are kept, and few of them.
type applyConfigCache struct {
	mu      sync.Mutex
	configs map[string]*applyConfig
}

const (
	applyConfigsKept     = 64
	applyConfigKeptBytes = 32 << 10
)

func (c *applyConfigCache) get(body []byte) *applyConfig {
	if len(body) > applyConfigKeptBytes {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.configs[string(body)]
}

func (c *applyConfigCache) put(cfg *applyConfig) {
	if len(cfg.body) > applyConfigKeptBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.configs == nil {
		c.configs = map[string]*applyConfig{}
	}
	if len(c.configs) >= applyConfigsKept {
		for k := range c.configs { // any one goes
			delete(c.configs, k)
			break
		}
	}
	c.configs[cfg.body] = cfg
}

// serveApply answers a server-side apply to the object or to sub
// ("status").
func (s *Server) serveApply(w http.ResponseWriter, r *http.Request, ri *requestInfo, sub string, fv fieldValidation) error {
	force, err := patchOptions(r)
	if err != nil {
		return err
	}
	cfg, err := s.readApply(r, fv)
	if err != nil {
		return err
	}
	rs := ri.store
	fms, err := rs.fields()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	fm, res, manager := fms.forSubresource(sub), ri.res, r.URL.Query().Get("fieldManager")
	applyTo := func(cur api.Object) (api.Object, error) {
		setTypeMeta(res, cur)
		call := appliedCall{sub: sub, manager: manager, force: force, config: cfg.sum}
		if fms.noops.has(cur, call) {
			return cur, nil // what fm.Apply returned for these, the last time
		}
		out, err := fm.Apply(cur, cfg.patch.DeepCopy(), manager, force)
		if err != nil {
			return nil, applyFailed(err)
		}
		obj, ok := out.(api.Object)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apply made a %T", out))
		}
		if cur.GetUID() != "" && apiequality.Semantic.DeepEqual(obj, cur) {
			fms.noops.add(cur, call)
		}
		if err := checkIdentity(res, obj, ri.namespace, ri.name); err != nil {
			return nil, err
		}
		return obj, nil
	}
	o := updateOptions{mode: modeMain, dry: dryRun(r), subresource: sub}
	switch sub {
	case "status":
		o.mode = modeStatus
	case "approval":
		o.mode = modeApproval
	}
	for attempt := 0; ; attempt++ {
		out, err := s.updateObject(r.Context(), rs, ri.namespace, ri.name, o, applyTo)
		if err == nil {
			writeWritten(w, r, res, http.StatusOK, out)
			return nil
		}
		if !apierrors.IsNotFound(err) || sub != "" || attempt == 2 {
			return err
		}
		// Nothing to apply to: the configuration is the new object.
		obj, err := applyTo(res.NewObject())
		if err != nil {
			return err
		}
		raw, err := s.createObject(r.Context(), rs, obj, createOptions{dry: o.dry, keep: answersProtobuf(r, res)})
		if apierrors.IsAlreadyExists(err) {
			continue // created meanwhile: apply to it
		}
		if err != nil {
			return err
		}
		writeCreated(w, r, res, obj, raw)
		return nil
	}
}

// applyFailed answers an apply the field manager refused: a Status (a
// conflict, a wrong apiVersion) as it is; anything else, such as a field
// the kind does not have, as kube-apiserver answers it: 500 with the
// field manager's message.
func applyFailed(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonUnknown, Message: err.Error(),
	}}
}
