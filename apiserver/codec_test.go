package apiserver

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"

	"github.com/minictl/minictl/api"
)

// TestDecodeExactlyAgrees checks the fast decoder against the reference
// one: for random objects of every kind minictl serves, encoded as
// encoding/json encodes them and then with random members set to null,
// whatever decodeExactly accepts must decode to exactly what Kubernetes'
// strict decoder makes of it, and it must accept every unmutated object
// (or the fast path would be dead for that kind).
func TestDecodeExactlyAgrees(t *testing.T) {
	for _, res := range api.Resources() {
		if !exactType(reflect.TypeOf(res.New())) {
			continue // never decoded by decodeExactly (TestDecodeExactlyKinds)
		}
		t.Run(res.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(res.Plural))).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
				func(q *resource.Quantity, c randfill.Continue) {
					*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
				},
				func(v *intstr.IntOrString, c randfill.Continue) {
					if c.Bool() {
						*v = intstr.FromInt32(c.Int31())
					} else {
						*v = intstr.FromString(c.String(0))
					}
				},
				func(tm *metav1.Time, c randfill.Continue) {
					*tm = metav1.Unix(c.Int63n(4e9), 0)
				},
				func(fv *metav1.FieldsV1, c randfill.Continue) {
					fv.Raw = fmt.Appendf(nil, `{"f:k%d":{}}`, c.Intn(100))
				},
				func(tm *metav1.MicroTime, c randfill.Continue) {
					*tm = metav1.NewMicroTime(metav1.Unix(c.Int63n(4e9), c.Int63n(1e9)).Time)
				},
			)
			rnd := rand.New(rand.NewPCG(1, 2))
			accepted := 0
			for i := range 200 {
				obj := res.New()
				f.Fill(obj)
				data, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if i%2 == 1 {
					data = nullSome(t, data, rnd)
				}
				want := res.New()
				strict, err := sigsjson.UnmarshalStrict(data, want, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
				got := res.New()
				if !decodeExactly(data, got) {
					if i%2 == 0 {
						t.Fatalf("decodeExactly refused an object encoding/json made:\n%s", data)
					}
					continue
				}
				accepted++
				if err != nil || len(strict) > 0 {
					t.Fatalf("decodeExactly accepted what the strict decoder refuses (%v, %v):\n%s", err, strict, data)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("decoders disagree on\n%s\nexactly: %+v\nstrict:  %+v", data, got, want)
				}
			}
			if accepted < 150 {
				t.Errorf("decodeExactly accepted only %d of 200 objects", accepted)
			}
		})
	}
}

// nullSome sets about a fifth of the members of data's objects to null.
func nullSome(t *testing.T, data []byte, rnd *rand.Rand) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				if k != "apiVersion" && k != "kind" && rnd.IntN(5) == 0 {
					v[k] = nil
					continue
				}
				walk(m)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeExactlyRefuses lists what decodeExactly must leave to the
// Kubernetes decoder, which warns about it, refuses it, or describes the
// error, and edge cases it may take.
func TestDecodeExactlyRefuses(t *testing.T) {
	for _, body := range []string{
		`{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i","bogus":1}]}}`, // unknown field
		`{"metadata":{"name":"a","name":"b"}}`,                                                 // duplicate field
		`{"metadata":{"Name":"a"}}`,                                                            // another case
		`{"metadata":{"name":"a"}} {}`,                                                         // two values
		`{"metadata":{"name":"a"`,                                                              // truncated
		`{"metadata":{"labels":{"a":"` + "\xff" + `"}}}`,                                       // invalid UTF-8
		`{"spec":{"priority":"1"}}`,                                                            // wrong type
		`{"spec":{"priority":1e2}}`,                                                            // exponent into an int
		`{"spec":{"priority":1.0}}`,                                                            // fraction into an int
		`{"metadata":{"name":"a","n\u0061me":"b"}}`,                                            // duplicate, one escaped
		`{"metadata":{"name":"\ud800"}}`,                                                       // lone surrogate
		`[]`,
	} {
		if decodeExactly([]byte(body), api.Pods.New()) {
			t.Errorf("decodeExactly accepted %s", body)
		}
	}
	// What it accepts, it must decode as the strict decoder does: nulls
	// for fields with their own UnmarshalJSON among them.
	for _, body := range []string{
		`{}`, `null`, " \n{} ", `{"metadata":null}`,
		fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q}}`, "a"),
		`{"metadata":{"creationTimestamp":null,"deletionTimestamp":null,"labels":{"k":"v"}}}`,
		`{"spec":{"overhead":{"cpu":null},"containers":[{"name":"c","resources":{"limits":{"cpu":null,"memory":"1Gi"}}}]}}`,
		`{"spec":{"containers":[{"name":"c","livenessProbe":{"httpGet":{"port":null}},"readinessProbe":{"httpGet":{"port":"http"}}}]}}`,
		`{"metadata":{"name":"caf\u00e9","annotations":{"\u0041":"\u0000"}}}`,
	} {
		got, want := api.Pods.New(), api.Pods.New()
		if !decodeExactly([]byte(body), got) {
			t.Errorf("decodeExactly refused %s", body)
			continue
		}
		strict, err := sigsjson.UnmarshalStrict([]byte(body), want, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil || len(strict) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decodeExactly gave %+v; the strict decoder %+v (%v, %v)", body, got, want, err, strict)
		}
	}
}

// TestDecodeExactlyKinds guards what TestDecodeExactlyAgrees cannot see:
// json/v2 decodes a number into an interface{} as a float64 where the
// strict decoder keeps an int64, and reads durations and floats its own
// way. A kind that has such a field must not take decodeExactly.
func TestDecodeExactlyKinds(t *testing.T) {
	for _, res := range api.Resources() {
		var problems []string
		seen := map[reflect.Type]bool{}
		var walk func(path string, typ reflect.Type)
		walk = func(path string, typ reflect.Type) {
			if seen[typ] {
				return
			}
			seen[typ] = true
			switch typ.Kind() {
			case reflect.Interface, reflect.Float32, reflect.Float64:
				problems = append(problems, fmt.Sprintf("%s is a %s", path, typ))
			case reflect.Int64:
				if typ == reflect.TypeFor[time.Duration]() {
					problems = append(problems, fmt.Sprintf("%s is a time.Duration", path))
				}
			case reflect.Pointer, reflect.Slice, reflect.Array:
				walk(path+"[]", typ.Elem())
			case reflect.Map:
				walk(path+"{}", typ.Elem())
			case reflect.Struct:
				for f := range typ.Fields() {
					if f.IsExported() {
						walk(path+"."+f.Name, f.Type)
					}
				}
			}
		}
		walk(res.Kind, reflect.TypeOf(res.New()))
		if len(problems) > 0 && exactType(reflect.TypeOf(res.New())) {
			t.Errorf("%s takes decodeExactly, yet %s", res.Kind, strings.Join(problems, "; "))
		}
	}
}

// marshalObject writes an unstructured object as json.Marshal does, to
// the byte: HTML characters and line separators escaped, invalid UTF-8
// replaced, floats and large integers as encoding/json formats them.
func TestMarshalObjectUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "labels": map[string]any{"b": "<&>", "a": "\u2028\u2029"}},
		"spec": map[string]any{
			"f": []any{0.5, 1e21, 1e-7, -0.0, 123456789.125, int64(math.MaxInt64), nil, true},
			"s": "bad \xff utf-8 \"quoted\" \\ \t\n",
			"e": map[string]any{}, "l": []any{},
		},
	}}
	for _, obj := range []*unstructured.Unstructured{u, {}} {
		want, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("marshalObject:\n%s\njson.Marshal:\n%s", got, want)
		}
	}
}
