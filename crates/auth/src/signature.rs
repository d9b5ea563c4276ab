//! RocketMQ's request signature: Base64(HmacSHA1(secret key, content)), where the content is
//! the values of the request's ext fields except `Signature`, in the order of their keys
//! (Java's `TreeMap<String, String>`, so UTF-16 code-unit order), concatenated as UTF-8 with
//! nothing between them, followed by the body. Java's `AclClientRPCHook` signs that way and
//! `DefaultAuthenticationContextBuilder` (ACL 2.0) and `PlainAccessResource` (1.0) check it.
//!
//! The MAC is fed field by field and then the body, so checking a signature allocates nothing:
//! the fields' indexes are sorted by key in a fixed array on the stack, and a request with more
//! ext fields than that array holds is refused before any work. The comparison is the MAC crate's
//! constant-time one, over the decoded 20-byte tag.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

use crate::protocol::command::{ExtFields, RemotingCommand};

/// The ext field carrying the user's access key (ACL 2.0: the user name).
pub const ACCESS_KEY: &str = "AccessKey";
/// The ext field carrying the signature; the only field left out of the content.
pub const SIGNATURE: &str = "Signature";
/// The optional ext field carrying a security token (STS); it is signed like any other field.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// Java's `MixAll.UNIQUE_MSG_QUERY_FLAG`: left out of the content for clients of 4.9.3 and
/// older, which added it after signing.
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
/// `MQVersion.Version.V4_9_3.ordinal()`.
const V4_9_3: i32 = 399;
/// The most ext fields a signed request may have. Java's request headers have at most about
/// thirty fields; the array holding them for sorting lives on the stack.
pub const MAX_SIGNED_FIELDS: usize = 96;
// Field indexes are kept as bytes.
const _: () = assert!(MAX_SIGNED_FIELDS <= u8::MAX as usize + 1);
/// Length of an HmacSHA1 tag.
const TAG_LEN: usize = 20;

type HmacSha1 = Hmac<Sha1>;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("the request has {0} ext fields, more than the {MAX_SIGNED_FIELDS} a signed request may have")]
    TooManyFields(usize),
    #[error("the request carries no Signature")]
    Missing,
    #[error("check signature failed.")]
    Mismatch,
}

/// The signature of a request with these ext fields and body, as a client computes it (the
/// fields must already include `AccessKey` and, if used, `SecurityToken`).
pub fn sign(secret_key: &str, fields: &ExtFields, body: &[u8]) -> Result<String, SignatureError> {
    let mac = content_mac(secret_key, fields, body, i32::MAX)?;
    Ok(STANDARD.encode(mac.finalize().into_bytes()))
}

/// Signs a request as Java's `AclClientRPCHook` does: `AccessKey` added to its ext fields,
/// then `Signature` over them and the body. The request's header must already be in its ext
/// fields.
pub fn sign_request(
    cmd: &mut RemotingCommand,
    access_key: &str,
    secret_key: &str,
) -> Result<(), SignatureError> {
    cmd.ext_fields.insert(ACCESS_KEY, access_key);
    let signature = sign(secret_key, &cmd.ext_fields, &cmd.body)?;
    cmd.ext_fields.insert(SIGNATURE, &signature);
    Ok(())
}

/// Checks a received request's `Signature` against the secret key. `version` is the request's
/// version field (it decides whether `_UNIQUE_KEY_QUERY` is signed).
pub fn verify(
    secret_key: &str,
    fields: &ExtFields,
    body: &[u8],
    version: i32,
) -> Result<(), SignatureError> {
    let signature = fields.get(SIGNATURE).ok_or(SignatureError::Missing)?;
    let mut tag = [0u8; TAG_LEN + 3];
    let tag = match STANDARD.decode_slice(signature.as_bytes(), &mut tag) {
        Ok(TAG_LEN) => &tag[..TAG_LEN],
        _ => {
            // Still run the MAC, so a malformed signature costs what a wrong one does.
            let _ = content_mac(secret_key, fields, body, version)?;
            return Err(SignatureError::Mismatch);
        }
    };
    content_mac(secret_key, fields, body, version)?
        .verify_slice(tag)
        .map_err(|_| SignatureError::Mismatch)
}

/// Checks a gRPC call's signature (RocketMQ 5's `authorization` header): HmacSHA1 keyed with
/// the secret key over the exact bytes of the `x-mq-date-time` value, sent hex encoded (the Java
/// SDK upper-case, the others lower-case). A malformed signature is a mismatch.
pub fn verify_grpc(
    secret_key: &str,
    date_time: &str,
    signature_hex: &str,
) -> Result<(), SignatureError> {
    let mut mac = HmacSha1::new_from_slice(secret_key.as_bytes()).expect("HMAC takes any key");
    mac.update(date_time.as_bytes());
    let mut tag = [0u8; TAG_LEN];
    let hex = signature_hex.as_bytes();
    if hex.len() != 2 * TAG_LEN {
        return Err(SignatureError::Mismatch);
    }
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => tag[i] = (h * 16 + l) as u8,
            _ => return Err(SignatureError::Mismatch),
        }
    }
    mac.verify_slice(&tag).map_err(|_| SignatureError::Mismatch)
}

/// A gRPC call's signature, as the SDKs compute it (lower-case hex).
pub fn sign_grpc(secret_key: &str, date_time: &str) -> String {
    let mut mac = HmacSha1::new_from_slice(secret_key.as_bytes()).expect("HMAC takes any key");
    mac.update(date_time.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The MAC over the content, fed without building it.
fn content_mac(
    secret_key: &str,
    fields: &ExtFields,
    body: &[u8],
    version: i32,
) -> Result<HmacSha1, SignatureError> {
    if fields.len() > MAX_SIGNED_FIELDS {
        return Err(SignatureError::TooManyFields(fields.len()));
    }
    // The fields' indexes, sorted by key: 96 bytes on the stack (an array of the string
    // pairs themselves was 3 KiB to clear per request).
    let mut order = [0u8; MAX_SIGNED_FIELDS];
    let mut n = 0;
    for i in 0..fields.len() {
        let (k, _) = fields.field(i);
        if k == SIGNATURE || (version <= V4_9_3 && k == UNIQUE_KEY_QUERY) {
            continue;
        }
        order[n] = i as u8;
        n += 1;
    }
    let order = &mut order[..n];
    order.sort_unstable_by(|&a, &b| {
        java_string_order(fields.field(a as usize).0, fields.field(b as usize).0)
    });
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = HmacSha1::new_from_slice(secret_key.as_bytes()).expect("HMAC takes any key");
    for &i in order.iter() {
        mac.update(fields.field(i as usize).1.as_bytes());
    }
    mac.update(body);
    Ok(mac)
}

/// Java's `String.compareTo`: UTF-16 code units. Equal to byte order for ASCII keys, which is
/// what request headers have.
fn java_string_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

#[cfg(test)]
mod tests;
