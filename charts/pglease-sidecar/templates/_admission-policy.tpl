{{/*
A ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1, Kubernetes >= 1.30)
that hold the sidecar's ServiceAccount to what pglease writes. A Role cannot name a Deployment's
pods (their names are generated), so it grants patch on every pod of the namespace; this policy,
enforced by the API server, lets that account change only the role label, the pglease.io/
annotations (and the renamed ones of `publish`) and the leadership condition, and only on pods
carrying every label of admissionPolicy.podLabels in its own namespace. Everything else on the pod
(other labels and annotations, finalizers, owners, spec, other conditions and status) must stay
as it was. Both objects are cluster-scoped: installing them needs a cluster role that may create
them. Rendered only where the API server serves the kind (.Capabilities). Render it from a
template file of its own: {{ include "pglease-sidecar.admissionPolicy" (dict ...) }}
*/}}
{{- define "pglease-sidecar.admissionPolicy" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- if and $c.admissionPolicy.create (.context.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") }}
{{- if not $c.admissionPolicy.podLabels }}
{{- fail "admissionPolicy.podLabels: name the labels every pod of the workload carries (its selector, e.g. {app.kubernetes.io/name: orders}), or set admissionPolicy.create to false" }}
{{- end }}
{{- $namespace := .context.Release.Namespace }}
{{- $account := include "pglease-sidecar.serviceAccountName" . }}
{{- /* Cluster-scoped: the namespace makes the name unique across installs of one name. */}}
{{- $name := printf "%s.%s.pglease.io" $c.name $namespace | trunc 253 }}
{{- $p := $c.publish }}
{{- $ownAnnotations := list $p.fenceAnnotation $p.holderAnnotation $p.leaseAnnotation }}
{{- /* Every field of core/v1 PodStatus but conditions (Kubernetes 1.35). */}}
{{- $statusFields := list "observedGeneration" "phase" "message" "reason" "nominatedNodeName" "hostIP" "hostIPs" "podIP" "podIPs" "startTime" "initContainerStatuses" "containerStatuses" "qosClass" "ephemeralContainerStatuses" "resize" "resourceClaimStatuses" "extendedResourceClaimStatus" "allocatedResources" "resources" }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $name }}
  {{- with $c.labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      # A patch reaches admission as an UPDATE, with the pod before (oldObject) and after (object).
      - apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods", "pods/status"]
        operations: ["UPDATE"]
  matchConditions:
    - name: pglease-sidecar
      expression: request.userInfo.username == {{ printf "system:serviceaccount:%s:%s" $namespace $account | quote }}
  variables:
    - name: oldLabels
      expression: oldObject.metadata.?labels.orValue({})
    - name: newLabels
      expression: object.metadata.?labels.orValue({})
    - name: oldAnnotations
      expression: oldObject.metadata.?annotations.orValue({})
    - name: newAnnotations
      expression: object.metadata.?annotations.orValue({})
    - name: ownAnnotations
      expression: {{ toJson $ownAnnotations | quote }}
  validations:
    - expression: >-
        request.namespace == {{ $namespace | quote }}
        {{- range $key, $value := $c.admissionPolicy.podLabels }}
        && variables.oldLabels[?{{ $key | quote }}] == optional.of({{ $value | toString | quote }})
        {{- end }}
      message: {{ printf "pglease's service account may change only pods of its own workload (labels %s in namespace %s)" (include "pglease-sidecar.labelString" $c.admissionPolicy.podLabels) $namespace | quote }}
      reason: Forbidden
    - expression: >-
        variables.oldLabels.all(k, k == {{ $p.roleLabel | quote }} || variables.newLabels[?k] == optional.of(variables.oldLabels[k]))
        && variables.newLabels.all(k, k == {{ $p.roleLabel | quote }} || k in variables.oldLabels)
      message: {{ printf "pglease's service account may change no label but %s" $p.roleLabel | quote }}
      reason: Forbidden
    - expression: >-
        variables.oldAnnotations.all(k, k.startsWith("pglease.io/") || k in variables.ownAnnotations
        || variables.newAnnotations[?k] == optional.of(variables.oldAnnotations[k]))
        && variables.newAnnotations.all(k, k.startsWith("pglease.io/") || k in variables.ownAnnotations
        || k in variables.oldAnnotations)
      message: {{ printf "pglease's service account may change no annotation but pglease.io/* and %s" (join ", " $ownAnnotations) | quote }}
      reason: Forbidden
    - expression: >-
        object.metadata.?finalizers == oldObject.metadata.?finalizers
        && object.metadata.?ownerReferences == oldObject.metadata.?ownerReferences
        && object.spec == oldObject.spec
      message: "pglease's service account may not change a pod's spec, finalizers or owners"
      reason: Forbidden
    - expression: >-
        object.status.?conditions.orValue([]).filter(c, c.type != {{ $p.conditionType | quote }})
        == oldObject.status.?conditions.orValue([]).filter(c, c.type != {{ $p.conditionType | quote }})
        {{- range $statusFields }}
        && object.status.?{{ . }} == oldObject.status.?{{ . }}
        {{- end }}
      message: {{ printf "pglease's service account may change no pod condition but %s, and no other status" $p.conditionType | quote }}
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $name }}
  {{- with $c.labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  policyName: {{ $name }}
  validationActions: [Deny]
{{- end }}
{{- end }}

{{/* A map of labels as a selector string: a=1,b=2 (keys sorted). */}}
{{- define "pglease-sidecar.labelString" -}}
{{- $parts := list }}
{{- range $key, $value := . }}
{{- $parts = append $parts (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $parts }}
{{- end }}
