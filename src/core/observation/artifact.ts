/**
 * Artifact references for large or binary tool output (spec ch. 12, "Never place arbitrary binary
 * bytes or an unbounded base64 string directly into model context").
 *
 * Guarantees: a reference carries digest, size, media type and storage tenant, never bytes; it is
 * accepted only when it is stored under the requesting tenant, the tenant-scoped store record the
 * adapter looked up agrees on digest, size and media type, and it is within the policy's bound.
 * Content equality never grants cross-tenant access: the same digest under another tenant is
 * rejected.
 * Never: fetches or decodes the artifact (the adapter did the store lookup), reads a clock, or
 * does I/O.
 */
import { sha256Hex } from '../canonical/canonical.js';
import type {
  ArtifactMedia,
  ArtifactReference,
  ObservationPolicy,
  ObservationTrustedContext,
  ObservationViolation,
} from './schema.js';

export function checkArtifact(
  artifact: ArtifactReference,
  mediaType: string,
  policy: ObservationPolicy,
  trusted: ObservationTrustedContext,
): ObservationViolation[] {
  const v = new Set<ObservationViolation>();
  // Tenant A's output entering tenant B's context, even when the bytes are identical.
  if (artifact.storage_tenant_id !== trusted.tenant_id) v.add('artifact_cross_tenant');
  const record = trusted.artifact_record;
  // A reference to nothing the tenant's store holds cannot be restored or inspected.
  if (record === null) v.add('artifact_not_found');
  else {
    if (record.tenant_id !== trusted.tenant_id) v.add('artifact_cross_tenant');
    // The reference must describe what is stored, or the store serves different bytes.
    if (
      record.artifact_sha256 !== artifact.artifact_sha256 ||
      record.byte_size !== artifact.byte_size ||
      record.media_type !== artifact.media_type
    ) {
      v.add('artifact_record_mismatch');
    }
  }
  // One observation, two media types: decoders would disagree about what the bytes are.
  if (artifact.media_type !== mediaType) v.add('artifact_media_type_mismatch');
  // Referenced bytes are still bounded: decode, OCR and expansion cost follow size.
  if (artifact.byte_size > policy.max_artifact_bytes) v.add('payload_too_large');
  return [...v].sort();
}

/**
 * Build a reference for bytes the adapter is publishing to the tenant's content-addressed store.
 * The digest and size are computed here, never taken from the producer.
 */
export function artifactReferenceFor(
  bytes: Uint8Array,
  mediaType: string,
  storageTenantId: string,
  decoderRelease: string | null,
  media: ArtifactMedia | null,
): ArtifactReference {
  return {
    artifact_sha256: sha256Hex(bytes),
    byte_size: bytes.length,
    media_type: mediaType,
    storage_tenant_id: storageTenantId,
    decoder_release: decoderRelease,
    media,
  };
}
