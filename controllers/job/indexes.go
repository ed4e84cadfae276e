package job

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// noIndex is the completion index of a pod that has none, or a malformed
// one.
const noIndex = -1

// interval is the indexes first..last, both included.
type interval struct{ first, last int }

// indexSet is a set of completion indexes as ordered, disjoint, non-adjacent
// intervals: the shape of status.completedIndexes and
// status.failedIndexes ("1,3-5,7").
type indexSet []interval

// parseIndexSet reads kube's interval list, keeping only the indexes below
// completions and skipping what does not parse: the status is ours, but a
// hand-written one must not stop the controller.
func parseIndexSet(s string, completions int32) indexSet {
	var out []int
	if s == "" {
		return nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			continue
		}
		last := first
		if found {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				continue
			}
		}
		for i := first; i <= last && i < int(completions); i++ {
			out = append(out, i)
		}
	}
	return indexSet(nil).with(out)
}

// with returns s with the indexes added, which need not be ordered.
func (s indexSet) with(indexes []int) indexSet {
	present := map[int]bool{}
	for _, iv := range s {
		for i := iv.first; i <= iv.last; i++ {
			present[i] = true
		}
	}
	for _, i := range indexes {
		present[i] = true
	}
	if len(present) == 0 {
		return nil
	}
	maxIndex := 0
	for i := range present {
		maxIndex = max(maxIndex, i)
	}
	var out indexSet
	for i := 0; i <= maxIndex; i++ {
		if !present[i] {
			continue
		}
		if n := len(out); n > 0 && out[n-1].last == i-1 {
			out[n-1].last = i
		} else {
			out = append(out, interval{i, i})
		}
	}
	return out
}

func (s indexSet) has(i int) bool {
	for _, iv := range s {
		if i >= iv.first && i <= iv.last {
			return true
		}
	}
	return false
}

func (s indexSet) total() int {
	n := 0
	for _, iv := range s {
		n += iv.last - iv.first + 1
	}
	return n
}

// String is kube's spelling: "1,3-5,7"; a pair of neighbours is "3,4",
// as kube writes it.
func (s indexSet) String() string {
	var b strings.Builder
	for k, iv := range s {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(iv.first))
		switch {
		case iv.last == iv.first+1:
			b.WriteString("," + strconv.Itoa(iv.last))
		case iv.last > iv.first:
			b.WriteString("-" + strconv.Itoa(iv.last))
		}
	}
	return b.String()
}

// completionIndex is the pod's batch.kubernetes.io/job-completion-index
// annotation, or noIndex.
func completionIndex(pod *corev1.Pod) int {
	v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return noIndex
	}
	return i
}

// validIndex is completionIndex when it is below the Job's completions,
// else noIndex.
func validIndex(job *batchv1.Job, pod *corev1.Pod) int {
	i := completionIndex(pod)
	if i == noIndex || job.Spec.Completions == nil || i >= int(*job.Spec.Completions) {
		return noIndex
	}
	return i
}

// indexFailureCount is the pod's batch.kubernetes.io/job-index-failure-count
// annotation: how many pods of its index failed before it, counted.
func indexFailureCount(pod *corev1.Pod) int32 {
	n, err := strconv.ParseInt(pod.Annotations[batchv1.JobIndexFailureCountAnnotation], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// indexIgnoredFailureCount is the same for failures an Ignore rule let go.
func indexIgnoredFailureCount(pod *corev1.Pod) int32 {
	n, err := strconv.ParseInt(pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// podGenerateName is kube's generateName of an Indexed Job's pod,
// "<job>-<index>-", the job's name cut so that the random suffix fits.
func podGenerateName(jobName string, index int) string {
	const maxPrefix = 63 - 5
	suffix := "-" + strconv.Itoa(index) + "-"
	if len(jobName)+len(suffix) > maxPrefix {
		jobName = jobName[:max(0, maxPrefix-len(suffix))]
	}
	return jobName + suffix
}
