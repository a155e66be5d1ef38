{{/*
The ServiceAccount (serviceAccount.create), and a namespaced Role and RoleBinding (rbac.create)
granting what the sidecar does with the API and nothing more: it watches its own pod, patches
its labels and annotations (and, as a new leader, those of a peer still labelled leader),
patches the leadership condition on pods/status, and records a core/v1 Event for each gain and
loss. Render it from a template file of its own: {{ include "pglease-sidecar.rbac" (dict ...) }}
*/}}
{{- define "pglease-sidecar.rbac" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- include "pglease-sidecar.validateName" $c }}
{{- $account := include "pglease-sidecar.serviceAccountName" . }}
{{- if $c.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $account }}
  {{- with $c.labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
# Pods opt in per container: the sidecar mounts a projected token, nothing else gets one.
automountServiceAccountToken: false
{{- end }}
{{- if $c.rbac.create }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $c.name }}
  {{- with $c.labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list", "watch", "patch"]
  - apiGroups: [""]
    resources: ["pods/status"]
    verbs: ["patch"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $c.name }}
  {{- with $c.labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $c.name }}
subjects:
  - kind: ServiceAccount
    name: {{ $account }}
    namespace: {{ .context.Release.Namespace }}
{{- end }}
{{- end }}
