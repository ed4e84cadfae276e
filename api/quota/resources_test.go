package quota

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// list builds a ResourceList from name, quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	if len(pairs)%2 != 0 {
		panic("list: odd number of arguments")
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestQuantitiesParseAndPrintExactly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"100m", "100m"},
		{"0.5", "500m"},
		{"1Gi", "1Gi"},
		{"512Mi", "512Mi"},
		{"2k", "2k"},
		{"1000m", "1"},
		{"1.5Gi", "1536Mi"},
	} {
		q := resource.MustParse(tc.in)
		if got := q.String(); got != tc.want {
			t.Errorf("MustParse(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAddIsExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want string
	}{
		{"a tenth and a fifth of a cpu", "0.1", "0.2", "300m"},
		{"millicores", "100m", "200m", "300m"},
		{"half and half", "0.5", "500m", "1"},
		{"binary memory", "512Mi", "512Mi", "1Gi"},
		{"decimal kilo", "2k", "2k", "4k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := Add(list("cpu", tc.a), list("cpu", tc.b))
			got := sum["cpu"]
			if got.String() != tc.want {
				t.Errorf("%s + %s = %s, want %s", tc.a, tc.b, got.String(), tc.want)
			}
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
				t.Errorf("%s + %s = %s, not equal to %s", tc.a, tc.b, got.String(), tc.want)
			}
		})
	}
}

func TestAddSubtractKeepInputsAndUnionNames(t *testing.T) {
	a := list("pods", "2", "requests.cpu", "300m")
	b := list("pods", "1", "requests.memory", "1Gi")
	sum := Add(a, b)
	if want := list("pods", "3", "requests.cpu", "300m", "requests.memory", "1Gi"); !Equals(sum, want) {
		t.Errorf("Add = %s, want %s", Format(sum), Format(want))
	}
	diff := Subtract(a, b)
	if want := list("pods", "1", "requests.cpu", "300m", "requests.memory", "-1Gi"); !Equals(diff, want) {
		t.Errorf("Subtract = %s, want %s", Format(diff), Format(want))
	}
	if Format(a) != "pods=2,requests.cpu=300m" || Format(b) != "pods=1,requests.memory=1Gi" {
		t.Errorf("inputs changed: a=%s b=%s", Format(a), Format(b))
	}
	// The result shares nothing with the inputs.
	q := sum["pods"]
	q.Add(resource.MustParse("10"))
	sum["pods"] = q
	if p := a["pods"]; p.String() != "2" {
		t.Errorf("changing the sum changed a: pods=%s", p.String())
	}
}

func TestMask(t *testing.T) {
	got := Mask(list("pods", "1", "cpu", "1", "memory", "1Gi"), []corev1.ResourceName{"pods", "memory", "secrets"})
	if want := "memory=1Gi,pods=1"; Format(got) != want {
		t.Errorf("Mask = %s, want %s", Format(got), want)
	}
}

func TestLessThanOrEqual(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     corev1.ResourceList
		ok       bool
		exceeded []corev1.ResourceName
	}{
		{"equal", list("pods", "2"), list("pods", "2"), true, nil},
		{"under", list("cpu", "999m"), list("cpu", "1"), true, nil},
		{"over by a millicore", list("cpu", "1001m"), list("cpu", "1"), false, []corev1.ResourceName{"cpu"}},
		{"names only one side has are not compared", list("pods", "9"), list("cpu", "1"), true, nil},
		{"exceeded sorted", list("pods", "3", "cpu", "2", "memory", "1Gi"), list("pods", "2", "cpu", "1", "memory", "2Gi"),
			false, []corev1.ResourceName{"cpu", "pods"}},
		{"units do not matter", list("memory", "1024Mi"), list("memory", "1Gi"), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, exceeded := LessThanOrEqual(tc.a, tc.b)
			if ok != tc.ok || !slices.Equal(exceeded, tc.exceeded) {
				t.Errorf("LessThanOrEqual(%s, %s) = %v, %v; want %v, %v",
					Format(tc.a), Format(tc.b), ok, exceeded, tc.ok, tc.exceeded)
			}
		})
	}
}

func TestEqualsComparesValues(t *testing.T) {
	if !Equals(list("cpu", "1000m", "memory", "1Gi"), list("cpu", "1", "memory", "1073741824")) {
		t.Error("1000m,1Gi should equal 1,1073741824")
	}
	if Equals(list("cpu", "1"), list("cpu", "1", "pods", "0")) {
		t.Error("lists with different names should differ")
	}
	if Equals(list("cpu", "1"), list("cpu", "2")) {
		t.Error("cpu=1 should differ from cpu=2")
	}
	if !Equals(nil, corev1.ResourceList{}) {
		t.Error("nil and empty should be equal")
	}
}

func TestFormatSortsNames(t *testing.T) {
	got := Format(list("requests.memory", "512Mi", "pods", "1", "limits.cpu", "0.5"))
	if want := "limits.cpu=500m,pods=1,requests.memory=512Mi"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
}
