{{/* The chart's name, at most 63 characters. */}}
{{- define "nats-keeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's name for the chart's objects, at most 63 characters. */}}
{{- define "nats-keeper.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nats-keeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nats-keeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nats-keeper.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nats-keeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "nats-keeper.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "nats-keeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nats-keeper.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Where the Secret's files are mounted. */}}
{{- define "nats-keeper.secretDir" -}}/etc/nats-keeper/secret{{- end -}}

{{/*
The Secret's keys mounted as files: flag, key in the Secret, file name.
Used by the keeper and by the hook Jobs (those take only the connection's).
*/}}
{{- define "nats-keeper.secretFiles" -}}
{{- $c := .Values.credentials -}}
{{- $files := list
  (list "--creds" $c.creds "nats.creds")
  (list "--nkey" $c.nkey "nats.nk")
  (list "--tls-cert" $c.tlsCert "tls.crt")
  (list "--tls-key" $c.tlsKey "tls.key")
  (list "--tls-ca" $c.tlsCA "ca.crt")
  (list "--store-creds" $c.storeCreds "store.creds")
  (list "--store-nkey" $c.storeNkey "store.nk")
  (list "--store-tls-cert" $c.storeTlsCert "store-tls.crt")
  (list "--store-tls-key" $c.storeTlsKey "store-tls.key")
  (list "--store-tls-ca" $c.storeTlsCA "store-ca.crt") -}}
{{- $out := list -}}
{{- range $files -}}
{{- if index . 1 -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Any credential named needs credentials.secretName. */}}
{{- define "nats-keeper.checkSecret" -}}
{{- $c := .Values.credentials -}}
{{- if and (not $c.secretName) (or $c.creds $c.nkey $c.tlsCert $c.tlsKey $c.tlsCA $c.storeCreds $c.storeNkey $c.storeTlsCert $c.storeTlsKey $c.storeTlsCA $c.s3AccessKeyId $c.s3SecretAccessKey $c.s3SessionToken $c.ageIdentity) -}}
{{- fail "credentials name keys of a Secret but credentials.secretName is empty, so nothing was rendered: set credentials.secretName to the Secret holding them" -}}
{{- end -}}
{{- if and $c.tlsCert (not $c.tlsKey) -}}
{{- fail "credentials.tlsCert is set without credentials.tlsKey, so nothing was rendered: name both keys" -}}
{{- end -}}
{{- end -}}

{{/* The pod's security context: not root, the image's own user. */}}
{{- define "nats-keeper.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "nats-keeper.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The Secret's files as a volume of the files named (mode 0440: the group is fsGroup). */}}
{{- define "nats-keeper.secretVolume" -}}
{{- $files := include "nats-keeper.secretFiles" . | fromJsonArray -}}
{{- if $files }}
- name: credentials
  secret:
    secretName: {{ .Values.credentials.secretName }}
    defaultMode: 0440
    items:
    {{- range $files }}
      - key: {{ index . 1 }}
        path: {{ index . 2 }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* The connection flags of the Secret's files whose flags are in $want. */}}
{{- define "nats-keeper.secretArgs" -}}
{{- $root := index . 0 -}}
{{- $want := index . 1 -}}
{{- range include "nats-keeper.secretFiles" $root | fromJsonArray }}
{{- if has (index . 0) $want }}
- {{ index . 0 }}
- {{ printf "%s/%s" (include "nats-keeper.secretDir" $root) (index . 2) }}
{{- end }}
{{- end }}
{{- end -}}
