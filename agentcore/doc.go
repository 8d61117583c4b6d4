// Package agentcore is the kernel: the loop that turns a user's words into
// model calls, gated commands and answers, and the one package that appends
// session events to the store. The model client lives in agentcore/openai.
package agentcore
