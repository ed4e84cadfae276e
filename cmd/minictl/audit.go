package main

import (
	"io"

	"github.com/minictl/minictl/auth/audit"
)

// openAudit opens the audit log and reads its policy, as the flags say;
// a nil log means none. A policy without a log is read all the same, so
// that a bad one is an error at once.
func (f *serverFlags) openAudit() (io.WriteCloser, *audit.Policy, error) {
	var policy *audit.Policy
	if f.auditPolicyFile != "" {
		p, err := audit.LoadPolicyFile(f.auditPolicyFile)
		if err != nil {
			return nil, nil, err
		}
		policy = p
	}
	if f.auditLogPath == "" {
		return nil, policy, nil
	}
	w, err := audit.OpenLog(f.auditLogPath)
	if err != nil {
		return nil, nil, err
	}
	return w, policy, nil
}
