//! `apache.rocketmq.v2.MessagingService`: each RPC reads the client's metadata (its
//! `x-mq-client-id` is required), finds the client (known from its first call on), and hands the request to the
//! module that serves it; every business error comes back in-band as the answer's `Status`.
//! PullMessage, UpdateOffset, GetOffset, QueryOffset, RecallMessage and SyncLiteSubscription
//! answer UNIMPLEMENTED, as Java's proxy does for the first four.

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::clients::{Client, ClientMeta};
use ringmq_broker::local::Signed;

use crate::endpoint::Endpoint;
use crate::pb::messaging_service_server::MessagingService;
use crate::pb::{self, Code};
use crate::status::{status_of, GrpcError};
use crate::{consume, produce, route, telemetry};

/// The service tonic serves.
pub struct Service {
    pub ep: Arc<Endpoint>,
}

/// A metadata value as text ("" when absent or not ASCII).
fn header<'a>(md: &'a MetadataMap, key: &str) -> &'a str {
    md.get(key).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// `grpc-timeout` in milliseconds (`<digits><H|M|S|m|u|n>`).
pub fn deadline_ms(md: &MetadataMap) -> Option<i64> {
    let v = header(md, "grpc-timeout");
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: i64 = digits.parse().ok()?;
    Some(match unit {
        "H" => n.saturating_mul(3_600_000),
        "M" => n.saturating_mul(60_000),
        "S" => n.saturating_mul(1000),
        "m" => n,
        "u" => n / 1000,
        "n" => n / 1_000_000,
        _ => return None,
    })
}

/// The identity a call claims: `authorization` is `MQv2-HMAC-SHA1 Credential=<ak>[/...],
/// SignedHeaders=x-mq-date-time, Signature=<hex>`, signed over `x-mq-date-time`.
pub fn signed(md: &MetadataMap) -> Option<Signed> {
    let auth = header(md, "authorization");
    let (_, fields) = auth.split_once(' ')?;
    let mut out = Signed {
        date_time: header(md, "x-mq-date-time").to_string(),
        ..Signed::default()
    };
    for f in fields.split(',') {
        match f.trim().split_once('=') {
            Some(("Credential", v)) => {
                out.access_key = v.split('/').next().unwrap_or("").to_string()
            }
            Some(("Signature", v)) => out.signature = v.to_string(),
            _ => {}
        }
    }
    Some(out)
}

impl Service {
    /// The calling client, known from its first call on.
    async fn client<T>(&self, r: &Request<T>) -> Result<Arc<Client>, GrpcError> {
        let md = r.metadata();
        let client_id = header(md, "x-mq-client-id");
        if client_id.is_empty() {
            return Err(GrpcError::new(
                Code::ClientIdRequired,
                "x-mq-client-id is required",
            ));
        }
        if client_id.len() > 256 {
            return Err(GrpcError::bad_request(
                "x-mq-client-id is longer than 256 bytes",
            ));
        }
        let peer = r
            .remote_addr()
            .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
        let meta = ClientMeta::new(
            client_id.to_string(),
            header(md, "x-mq-language"),
            header(md, "x-mq-client-version").to_string(),
            peer,
        );
        let (s, outbox) = self.ep.clients.open(&meta).await?;
        if let Some(outbox) = outbox {
            tokio::spawn(telemetry::relay(self.ep.clone(), s.clone(), outbox));
        }
        s.touch();
        s.set_signed(signed(md));
        Ok(s)
    }
}

type ReceiveStream = Pin<Box<dyn Stream<Item = Result<pb::ReceiveMessageResponse, Status>> + Send>>;
type PullStream = Pin<Box<dyn Stream<Item = Result<pb::PullMessageResponse, Status>> + Send>>;

#[tonic::async_trait]
impl MessagingService for Service {
    async fn query_route(
        &self,
        r: Request<pb::QueryRouteRequest>,
    ) -> Result<Response<pb::QueryRouteResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => route::query_route(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::QueryRouteResponse {
            status: Some(status_of(&res)),
            message_queues: res.unwrap_or_default(),
        }))
    }

    async fn heartbeat(
        &self,
        r: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => telemetry::heartbeat(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::HeartbeatResponse {
            status: Some(status_of(&res)),
        }))
    }

    async fn send_message(
        &self,
        r: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => produce::send(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(produce::send_answer(res)))
    }

    async fn query_assignment(
        &self,
        r: Request<pb::QueryAssignmentRequest>,
    ) -> Result<Response<pb::QueryAssignmentResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => route::query_assignment(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::QueryAssignmentResponse {
            status: Some(status_of(&res)),
            assignments: res.unwrap_or_default(),
        }))
    }

    type ReceiveMessageStream = ReceiveStream;

    async fn receive_message(
        &self,
        r: Request<pb::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        let deadline = deadline_ms(r.metadata());
        let res = match self.client(&r).await {
            Ok(s) => consume::receive(&self.ep, &s, r.into_inner(), deadline).await,
            Err(e) => Err(e),
        };
        let frames = consume::receive_frames(res, crate::now_ms());
        let stream: ReceiveStream = Box::pin(tokio_stream::iter(frames.into_iter().map(Ok)));
        Ok(Response::new(stream))
    }

    async fn ack_message(
        &self,
        r: Request<pb::AckMessageRequest>,
    ) -> Result<Response<pb::AckMessageResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => consume::ack(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(consume::ack_answer(res)))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        r: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<pb::ForwardMessageToDeadLetterQueueResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => consume::forward_to_dlq(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::ForwardMessageToDeadLetterQueueResponse {
            status: Some(status_of(&res)),
        }))
    }

    type PullMessageStream = PullStream;

    async fn pull_message(
        &self,
        _r: Request<pb::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, Status> {
        Err(Status::unimplemented(
            "PullMessage is not served (as Java's proxy)",
        ))
    }

    async fn update_offset(
        &self,
        _r: Request<pb::UpdateOffsetRequest>,
    ) -> Result<Response<pb::UpdateOffsetResponse>, Status> {
        Err(Status::unimplemented(
            "UpdateOffset is not served (as Java's proxy)",
        ))
    }

    async fn get_offset(
        &self,
        _r: Request<pb::GetOffsetRequest>,
    ) -> Result<Response<pb::GetOffsetResponse>, Status> {
        Err(Status::unimplemented(
            "GetOffset is not served (as Java's proxy)",
        ))
    }

    async fn query_offset(
        &self,
        _r: Request<pb::QueryOffsetRequest>,
    ) -> Result<Response<pb::QueryOffsetResponse>, Status> {
        Err(Status::unimplemented(
            "QueryOffset is not served (as Java's proxy)",
        ))
    }

    async fn end_transaction(
        &self,
        r: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => produce::end_transaction(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::EndTransactionResponse {
            status: Some(status_of(&res)),
        }))
    }

    type TelemetryStream = ReceiverStream<Result<pb::TelemetryCommand, Status>>;

    async fn telemetry(
        &self,
        r: Request<tonic::Streaming<pb::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, Status> {
        // Telemetry's failures are gRPC errors, as Java's proxy answers them.
        let s = self.client(&r).await.map_err(|e| match e.code {
            Code::ClientIdRequired | Code::BadRequest => Status::invalid_argument(e.message),
            Code::TooManyRequests => Status::resource_exhausted(e.message),
            _ => Status::internal(e.message),
        })?;
        let stream = telemetry::open_stream(self.ep.clone(), s, r.into_inner());
        Ok(Response::new(stream))
    }

    async fn notify_client_termination(
        &self,
        r: Request<pb::NotifyClientTerminationRequest>,
    ) -> Result<Response<pb::NotifyClientTerminationResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => telemetry::notify_termination(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::NotifyClientTerminationResponse {
            status: Some(status_of(&res)),
        }))
    }

    async fn change_invisible_duration(
        &self,
        r: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<pb::ChangeInvisibleDurationResponse>, Status> {
        let res = match self.client(&r).await {
            Ok(s) => consume::change_invisible_duration(&self.ep, &s, r.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::ChangeInvisibleDurationResponse {
            status: Some(status_of(&res)),
            receipt_handle: res.unwrap_or_default(),
        }))
    }

    async fn recall_message(
        &self,
        _r: Request<pb::RecallMessageRequest>,
    ) -> Result<Response<pb::RecallMessageResponse>, Status> {
        Ok(Response::new(pb::RecallMessageResponse {
            status: Some(
                GrpcError::new(Code::NotImplemented, "RecallMessage is not served yet").status(),
            ),
            message_id: String::new(),
        }))
    }

    async fn sync_lite_subscription(
        &self,
        _r: Request<pb::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<pb::SyncLiteSubscriptionResponse>, Status> {
        Err(Status::unimplemented("lite topics are not served"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_names_the_user_and_the_signature() {
        let mut md = MetadataMap::new();
        md.insert("x-mq-date-time", "20261208T014500Z".parse().unwrap());
        md.insert(
            "authorization",
            "MQv2-HMAC-SHA1 Credential=alice/x, SignedHeaders=x-mq-date-time, Signature=ab12"
                .parse()
                .unwrap(),
        );
        let s = signed(&md).unwrap();
        assert_eq!(
            (
                s.access_key.as_str(),
                s.signature.as_str(),
                s.date_time.as_str()
            ),
            ("alice", "ab12", "20261208T014500Z")
        );
        assert_eq!(signed(&MetadataMap::new()), None);
    }

    #[test]
    fn grpc_timeout_parses() {
        let mut md = MetadataMap::new();
        md.insert("grpc-timeout", "3S".parse().unwrap());
        assert_eq!(deadline_ms(&md), Some(3000));
        md.insert("grpc-timeout", "2500m".parse().unwrap());
        assert_eq!(deadline_ms(&md), Some(2500));
        md.insert("grpc-timeout", "x".parse().unwrap());
        assert_eq!(deadline_ms(&md), None);
        assert_eq!(deadline_ms(&MetadataMap::new()), None);
    }
}
