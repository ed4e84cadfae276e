package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/minictl/minictl/api"
)

// Client is the client of one resource: T is the k8s.io/api pointer type
// (*corev1.Pod) for a typed client (For), or api.Object for a client by
// descriptor (ForResource); the resource is the catalogue entry serving it.
// Objects it returns are new, owned by the caller, with TypeMeta set. It
// never modifies the objects passed to it.
//
// Requests ask for Kubernetes' protobuf encoding and writes send it, as
// client-go's typed clients do, for kinds that have it: encoding and
// decoding it cost a fraction of JSON's, which matters to informers that
// decode every change of every object and to kubelets that write the
// status of every pod and renew their Lease every ten seconds. A server
// that answers JSON is read as JSON. Patches and DeleteOptions are JSON.
type Client[T api.Object] struct {
	rc       *RESTClient
	res      *api.Resource
	protobuf bool // the resource's objects have a protobuf encoding
	// dynamic: T is api.Object, an interface JSON cannot decode into;
	// list items are decoded one by one into the resource's New.
	dynamic bool
}

// accept is what requests ask for: protobuf, or JSON where the server has
// none, when T has a protobuf encoding.
func (c *Client[T]) accept() string {
	if c.protobuf {
		return api.ProtobufMediaType + ", application/json"
	}
	return "application/json"
}

// For returns the client of the resource whose objects have type T. It panics
// when api serves no such type: that is a programming error, like a bad
// type assertion.
func For[T api.Object](rc *RESTClient) *Client[T] {
	var zero T
	res, ok := api.ForObject(zero)
	if !ok {
		panic(fmt.Sprintf("client.For: %T is not a served resource", zero))
	}
	return &Client[T]{rc: rc, res: res, protobuf: api.HasProtobuf(res.New())}
}

// ForResource returns the client of res, any resource the server serves,
// without a Go type at compile time: its objects are what res.New makes,
// the k8s.io/api type where the kind has one (and then the same objects,
// on the same wire, as For's) and unstructured.Unstructured where it has
// not (api.NewUnstructured). It is what code that handles every kind of a
// catalogue works with.
func ForResource(rc *RESTClient, res *api.Resource) *Client[api.Object] {
	return &Client[api.Object]{rc: rc, res: res, protobuf: api.HasProtobuf(res.New()), dynamic: true}
}

// Resource returns the catalogue entry of the client's resource.
func (c *Client[T]) Resource() *api.Resource { return c.res }

// REST returns the RESTClient c sends through.
func (c *Client[T]) REST() *RESTClient { return c.rc }

// List is one page of a list.
type List[T api.Object] struct {
	Items              []T
	ResourceVersion    string // watch from here to see every later change
	Continue           string // non-empty: pass as ListOptions.Continue for the next page
	RemainingItemCount *int64
}

// Get reads one object. namespace is ignored for cluster-scoped resources.
func (c *Client[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	path, err := objectPath(c.res, namespace, name)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("get %s: %w", c.res.Plural, err)
	}
	return c.do(ctx, http.MethodGet, path, "", nil)
}

// List reads the objects of namespace, or of all namespaces when namespace is
// "" (and always for a cluster-scoped resource). opts.Watch is ignored.
func (c *Client[T]) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*List[T], error) {
	path, err := collectionPath(c.res, namespace)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.res.Plural, err)
	}
	opts.Watch = false
	mt, data, err := c.rc.read(ctx, path, ListOptionsQuery(opts), c.accept())
	if err != nil {
		return nil, err
	}
	var meta metav1.ListMeta
	var items []T
	if mt == api.ProtobufMediaType {
		meta, items, err = c.decodeProtobufList(data)
	} else {
		meta, items, err = c.decodeJSONList(data)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: decode response: %w", c.res.Plural, err)
	}
	list := &List[T]{
		Items:              items,
		ResourceVersion:    meta.ResourceVersion,
		Continue:           meta.Continue,
		RemainingItemCount: meta.RemainingItemCount,
	}
	if list.Items == nil {
		list.Items = []T{}
	}
	for i, item := range list.Items {
		if any(item) == any(*new(T)) {
			return nil, fmt.Errorf("list %s: item %d is null", c.res.Plural, i)
		}
		c.setTypeMeta(item)
	}
	return list, nil
}

// decodeJSONList reads a <Kind>List in JSON.
func (c *Client[T]) decodeJSONList(data []byte) (metav1.ListMeta, []T, error) {
	if !c.dynamic {
		var wire struct {
			Metadata metav1.ListMeta `json:"metadata"`
			Items    []T             `json:"items"`
		}
		err := json.Unmarshal(data, &wire)
		return wire.Metadata, wire.Items, err
	}
	var wire struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return wire.Metadata, nil, err
	}
	items := make([]T, len(wire.Items))
	for i, raw := range wire.Items {
		if string(raw) == "null" {
			continue // reported as a null item
		}
		items[i] = c.res.New().(T)
		if err := decodeJSON(raw, items[i]); err != nil {
			return wire.Metadata, nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return wire.Metadata, items, nil
}

// decodeJSON decodes one object's JSON into obj. An unstructured object
// takes the JSON as it comes, with or without apiVersion and kind (the
// items of a list of a built-in kind carry neither, in kube-apiserver's
// answers); the caller sets them.
func decodeJSON(data []byte, obj any) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return utiljson.Unmarshal(data, &u.Object)
	}
	return json.Unmarshal(data, obj)
}

// decodeProtobufList reads a <Kind>List in protobuf.
func (c *Client[T]) decodeProtobufList(data []byte) (metav1.ListMeta, []T, error) {
	msg, err := c.unwrap(data, c.res.ListKindName())
	if err != nil {
		return metav1.ListMeta{}, nil, err
	}
	meta, raws, err := api.ProtobufListItems(msg)
	if err != nil {
		return meta, nil, err
	}
	items := make([]T, len(raws))
	for i, raw := range raws {
		items[i] = c.res.New().(T)
		if err := api.UnmarshalProtobuf(raw, items[i]); err != nil {
			return meta, nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return meta, items, nil
}

// Create creates obj in its namespace (metadata.namespace, required for a
// namespaced resource) and returns the object as stored.
func (c *Client[T]) Create(ctx context.Context, obj T) (T, error) {
	path, err := collectionPath(c.res, obj.GetNamespace())
	if err == nil && c.res.Namespaced && obj.GetNamespace() == "" {
		err = errors.New("metadata.namespace is required")
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("create %s: %w", c.res.Plural, err)
	}
	return c.send(ctx, http.MethodPost, path, obj)
}

// Update replaces obj. A metadata.resourceVersion that is no longer current
// fails with a Conflict (IsConflict); an empty one overwrites
// unconditionally. Status changes are ignored; use UpdateStatus.
func (c *Client[T]) Update(ctx context.Context, obj T) (T, error) {
	return c.put(ctx, obj)
}

// UpdateStatus replaces obj's status through the status subresource; the
// rest of obj is ignored by the server. resourceVersion works as in Update.
func (c *Client[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return c.put(ctx, obj, "status")
}

// UpdateApproval replaces the Approved and Denied conditions of a
// CertificateSigningRequest through its approval subresource, as
// client-go's UpdateApproval; the rest of obj is ignored by the server.
func (c *Client[T]) UpdateApproval(ctx context.Context, obj T) (T, error) {
	return c.put(ctx, obj, "approval")
}

func (c *Client[T]) put(ctx context.Context, obj T, subresource ...string) (T, error) {
	path, err := objectPath(c.res, obj.GetNamespace(), obj.GetName(), subresource...)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("update %s: %w", c.res.Plural, err)
	}
	return c.send(ctx, http.MethodPut, path, obj)
}

// Patch applies data, a patch of type pt (types.MergePatchType,
// types.JSONPatchType, types.StrategicMergePatchType), to the object or to
// its subresource, and returns the patched object.
func (c *Client[T]) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, subresource ...string) (T, error) {
	path, err := objectPath(c.res, namespace, name, subresource...)
	if err == nil && pt == "" {
		err = errors.New("patch type is required")
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("patch %s: %w", c.res.Plural, err)
	}
	return c.do(ctx, http.MethodPatch, path, string(pt), data)
}

// Delete deletes one object. opts travels as the JSON body: a
// GracePeriodSeconds, a PropagationPolicy (Foreground, Background, Orphan)
// and Preconditions (uid, resourceVersion; a mismatch is a Conflict). The
// object may live on after Delete returns, while finalizers or a graceful
// deletion hold it.
func (c *Client[T]) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	path, err := objectPath(c.res, namespace, name)
	if err != nil {
		return fmt.Errorf("delete %s: %w", c.res.Plural, err)
	}
	body, err := json.Marshal(&opts)
	if err != nil {
		return fmt.Errorf("delete %s: %w", c.res.Plural, err)
	}
	return c.rc.Do(ctx, http.MethodDelete, path, nil, "application/json", body, nil)
}

// DeleteCollection deletes every object of namespace (all namespaces when
// "") that listOpts selects.
func (c *Client[T]) DeleteCollection(ctx context.Context, namespace string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	path, err := collectionPath(c.res, namespace)
	if err != nil {
		return fmt.Errorf("deletecollection %s: %w", c.res.Plural, err)
	}
	body, err := json.Marshal(&opts)
	if err != nil {
		return fmt.Errorf("deletecollection %s: %w", c.res.Plural, err)
	}
	listOpts.Watch = false
	return c.rc.Do(ctx, http.MethodDelete, path, ListOptionsQuery(listOpts), "application/json", body, nil)
}

// Watch starts a watch of namespace (all namespaces when "") from
// opts.ResourceVersion; see Watcher. opts.Watch is implied.
func (c *Client[T]) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (*Watcher[T], error) {
	path, err := collectionPath(c.res, namespace)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", c.res.Plural, err)
	}
	opts.Watch = true
	ctx, cancel := context.WithCancel(ctx)
	body, mt, err := c.rc.stream(ctx, path, ListOptionsQuery(opts), c.accept())
	if err != nil {
		cancel()
		return nil, err
	}
	return newWatcher[T](ctx, cancel, c.res, body, mt == api.ProtobufMediaType), nil
}

// send encodes obj as the body of a request, in protobuf when its kind
// has it and else in JSON with TypeMeta set on a copy, and decodes the
// object answered.
func (c *Client[T]) send(ctx context.Context, method, path string, obj T) (T, error) {
	var body []byte
	var err error
	contentType := api.ProtobufMediaType
	if c.protobuf {
		body, err = api.MarshalProtobufAs(c.res.APIVersion(), c.res.Kind, obj)
	} else {
		cp := obj.DeepCopyObject().(api.Object)
		c.setTypeMeta(cp)
		body, err = json.Marshal(cp)
		contentType = "application/json"
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s %s: encode: %w", method, path, err)
	}
	return c.do(ctx, method, path, contentType, body)
}

// do sends one request and decodes the object answered, in protobuf or
// in JSON as the server chose.
func (c *Client[T]) do(ctx context.Context, method, path, contentType string, body []byte) (T, error) {
	var zero T
	mt, data, err := c.rc.call(ctx, method, path, nil, contentType, body, c.accept())
	if err != nil {
		return zero, err
	}
	out := c.res.New().(T)
	if mt == api.ProtobufMediaType {
		err = c.decodeProtobuf(data, out)
	} else {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return zero, fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	c.setTypeMeta(out)
	return out, nil
}

// decodeProtobuf reads one object of c's resource, with its envelope.
func (c *Client[T]) decodeProtobuf(data []byte, out T) error {
	msg, err := c.unwrap(data, c.res.Kind)
	if err != nil {
		return err
	}
	return api.UnmarshalProtobuf(msg, out)
}

// unwrap is the message in data, a protobuf envelope that must name kind
// (c's resource's, or its list's) in c's resource's apiVersion.
func (c *Client[T]) unwrap(data []byte, kind string) ([]byte, error) {
	apiVersion, got, msg, err := api.ProtobufObject(data)
	if err != nil {
		return nil, err
	}
	if got != kind || apiVersion != c.res.APIVersion() {
		return nil, fmt.Errorf("got %s %s, want %s %s", apiVersion, got, c.res.APIVersion(), kind)
	}
	return msg, nil
}

func (c *Client[T]) setTypeMeta(obj api.Object) {
	obj.GetObjectKind().SetGroupVersionKind(c.res.GroupVersion().WithKind(c.res.Kind))
}
