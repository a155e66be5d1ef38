{{/*
The pod-level settings: the service account, no token in every container (the sidecar mounts
its own, pglease-sidecar.volumes), and a termination grace period that leaves the sidecar time
to demote the pod and release the lease. Put it under the pod template's spec.
*/}}
{{- define "pglease-sidecar.podSpec" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson -}}
serviceAccountName: {{ include "pglease-sidecar.serviceAccountName" . }}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ int $c.terminationGracePeriodSeconds }}
{{- end }}

{{/* The pod's volumes for the sidecar and, with podInfo.enabled, the application: list items. */}}
{{- define "pglease-sidecar.volumes" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson -}}
- name: pglease-tmp
  emptyDir:
    sizeLimit: 16Mi
{{- /* What the kubelet would mount in every container, for the sidecar alone: a short-lived
token bound to the pod (the client re-reads it every minute), the cluster's CA, the namespace. */}}
- name: pglease-api-access
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3600
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- if $c.podInfo.enabled }}
- name: pglease-podinfo
  downwardAPI:
    items:
      - path: role
        fieldRef:
          fieldPath: {{ printf "metadata.labels['%s']" $c.publish.roleLabel | quote }}
      - path: fence
        fieldRef:
          fieldPath: {{ printf "metadata.annotations['%s']" $c.publish.fenceAnnotation | quote }}
      - path: holder
        fieldRef:
          fieldPath: {{ printf "metadata.annotations['%s']" $c.publish.holderAnnotation | quote }}
      - path: lease
        fieldRef:
          fieldPath: {{ printf "metadata.annotations['%s']" $c.publish.leaseAnnotation | quote }}
{{- end }}
{{- if $c.database.tls.caSecret }}
- name: pglease-database-ca
  secret:
    secretName: {{ $c.database.tls.caSecret }}
    items:
      - key: {{ $c.database.tls.caKey }}
        path: ca.crt
{{- end }}
{{- end }}

{{/*
For the application container's env: where the sidecar answers (it shares the pod's network)
and, with podInfo.enabled, where the role and fence files are. List items.
*/}}
{{- define "pglease-sidecar.appEnv" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson -}}
- name: LEADER_STATUS_URL
  value: {{ printf "http://127.0.0.1:%d/status" (int $c.sidecar.httpPort) | quote }}
{{- if $c.podInfo.enabled }}
- name: LEADER_INFO_DIR
  value: {{ $c.podInfo.mountPath | quote }}
{{- end }}
{{- end }}

{{/*
For the application container's volumeMounts: the role and fence files (podInfo.enabled) and,
only with app.automountServiceAccountToken, the pod's token. List items; may render nothing.
*/}}
{{- define "pglease-sidecar.appVolumeMounts" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- $mounts := list }}
{{- if $c.podInfo.enabled }}
{{- $mounts = append $mounts (dict "name" "pglease-podinfo" "mountPath" $c.podInfo.mountPath "readOnly" true) }}
{{- end }}
{{- if $c.app.automountServiceAccountToken }}
{{- $mounts = append $mounts (dict "name" "pglease-api-access" "mountPath" "/var/run/secrets/kubernetes.io/serviceaccount" "readOnly" true) }}
{{- end }}
{{- with $mounts }}{{ toYaml . }}{{ end }}
{{- end }}
