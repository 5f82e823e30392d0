// Package stepio is the contract between the Workflow's steps: where a step finds its
// inputs and leaves its outputs (the paths the WorkflowTemplates mount and read), the hosts
// file they hand each other, and the reference to the CR a run carries out.
//
// Steps import stepio (and stepcmd, the harness that runs them), never each other: what
// one step writes and the next reads is defined here once.
package stepio
