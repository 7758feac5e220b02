//! A stream's lines: [`LineStream`] over one kept-alive connection, resuming by itself
//! after cuts (core's cursors decide what was already handed out), and what it needs —
//! the object-safe face of the typed stream requests, the per-metric progress of `/data`
//! on std, the decision to resume or give up.

use super::*;

impl BenchClient {
    /// `/data` once the benchmark runs or ended, starting from `known` if given, else
    /// from a fresh `/status` (see [`data`](Self::data)): core's [`DataWait`] says when
    /// to ask again, the same wait as the blocking and embassy clients'.
    pub(super) fn data_once_ready(
        &mut self,
        id: u64,
        known: Option<&StatusInfo>,
    ) -> Result<LineStream<'_, MetricLine>, Error> {
        let cursor = Box::new(DataCursor::new(AnyMetrics::default()));
        let mut stream = self.open_stream(Resend::Data(id), cursor)?;
        let ready = match stream.open.as_mut() {
            Some(open) => open.wait_for_data(id, known.cloned()),
            None => Ok(false),
        };
        match ready {
            Ok(true) => stream.start()?,
            Ok(false) => stream.open = None,
            Err(failed) => stream.retry(failed)?,
        }
        Ok(stream)
    }

    /// A stream of `request` (not sent yet) over the client's connection and memory,
    /// its lines classified by `cursor`, resumed after a cut as the client's
    /// [`Retry`] policy says.
    pub(super) fn open_stream<F: OwnedLine>(
        &mut self,
        request: Resend,
        cursor: Box<dyn StreamCursor<F> + Send>,
    ) -> Result<LineStream<'_, F>, Error> {
        let context = request.context(&self.identity);
        let status = match request {
            Resend::Data(id) => Some(Context::of(&self.identity, &request::Status { id })),
            _ => None,
        };
        let mut resumption = Resumption::new(self.retry);
        if self.transport.link.reached() {
            resumption.reached();
        }
        let mut parts = self.parts();
        let fitted = request.with(|req| req.fit(&mut parts));
        fitted.map_err(|e| context.attach(e))?;
        let Parts {
            server,
            limits,
            endpoint,
            link,
            bufs,
            line_buf,
        } = parts;
        let connect_timeout = endpoint.connect_timeout;
        let talk = bufs
            .conversation(server, link, limits, connect_timeout)
            .map_err(|e| context.attach(e))?;
        Ok(LineStream {
            open: Some(Open {
                talk,
                paused: None,
                link,
                endpoint,
                status,
            }),
            early: Vec::new(),
            done: false,
            lines: LineDecoder::new(line_buf),
            pending: VecDeque::new(),
            context,
            resume: Resume {
                request,
                cursor,
                resumption,
                resumed: 0,
                silence_ends: false,
            },
        })
    }

    /// A log-like stream: sent at once, resumed after a cut.
    pub(super) fn log_stream(
        &mut self,
        request: Resend,
        cursor: Box<dyn StreamCursor<LogLine> + Send>,
    ) -> Result<LineStream<'_, LogLine>, Error> {
        let mut stream = self.open_stream(request, cursor)?;
        stream.start()?;
        Ok(stream)
    }
}

/// What a stream does with its request, whichever it is: one object-safe face of the
/// typed stream requests, so that a stream keeps one [`Resend`] and not a type.
pub(super) trait StreamTarget {
    fn context(&self, identity: &Identity) -> Context;
    fn exchange<'a, 'b>(&'a self, talk: &'a mut Conversation<'b>, now: CoreInstant) -> Ex<'a, 'b>;
    /// Makes `tx` large enough for the request head ([`fit_head`]).
    fn fit(&self, p: &mut Parts<'_>) -> Result<(), Failure>;
}

impl<R: StreamRequest> StreamTarget for R {
    fn context(&self, identity: &Identity) -> Context {
        Context::of(identity, self)
    }

    fn exchange<'a, 'b>(&'a self, talk: &'a mut Conversation<'b>, now: CoreInstant) -> Ex<'a, 'b> {
        talk.exchange(self, ResponseKind::Stream, now)
    }

    fn fit(&self, p: &mut Parts<'_>) -> Result<(), Failure> {
        fit_head(p.bufs, p.server, p.link, p.limits, p.endpoint, self)
    }
}

/// Per-metric progress of a `/data` stream on std: any number of metrics, names of any
/// length.
#[derive(Debug, Default)]
struct AnyMetrics(HashMap<Box<str>, Progress>);

impl MetricTable for AnyMetrics {
    fn progress(&mut self, name: &str) -> Result<&mut Progress, Untracked> {
        if !self.0.contains_key(name) {
            self.0.insert(name.into(), Progress::NEW);
        }
        self.0.get_mut(name).ok_or(Untracked::TableFull {
            capacity: usize::MAX,
        })
    }

    fn for_each(&mut self, each: &mut dyn FnMut(&mut Progress)) {
        self.0.values_mut().for_each(each);
    }
}

/// Why a try at a stream's response failed, and how the retry policy sees it.
struct Failed {
    error: Error,
    fault: Fault,
}

impl Failed {
    fn of(context: &Context, e: Failure) -> Failed {
        Failed {
            fault: fault(&e),
            error: context.attach(e),
        }
    }

    /// The server's error reply with `status`: worth trying again when a 5xx.
    fn refused(status: u16, error: Error) -> Failed {
        Failed {
            fault: if status >= 500 {
                Fault::Transient
            } else {
                Fault::Final
            },
            error,
        }
    }
}

/// How the retry policy sees `e`: core's view, except that a TLS refusal (a
/// certificate, an alert: data the TLS layer found invalid) or an invalid server name
/// fails again the same way.
pub(super) fn fault(e: &Failure) -> Fault {
    match e {
        ClientError::Connect(io) | ClientError::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
            ) =>
        {
            Fault::Final
        }
        e => Fault::of(e),
    }
}

/// A stream's conversation (over the client's memory) and the connection it reads
/// from, with its exchange paused between two reads while a response is being read.
struct Open<'c> {
    talk: Conversation<'c>,
    paused: Option<Paused<(), ()>>,
    link: &'c mut Link,
    endpoint: &'c Endpoint,
    /// A `/data` stream's `/status` request, as its errors name it.
    status: Option<Context>,
}

impl Open<'_> {
    /// Resumes the exchange and drives it as far as `until`, pausing it again if it
    /// goes on.
    fn drive(&mut self, sink: &mut dyn Sink, until: Until) -> Driven {
        let Some(paused) = self.paused.take() else {
            return Driven::Over(Ok(()));
        };
        let mut ex = self.talk.resume(paused);
        match self.link.drive(self.endpoint, &mut ex, sink, until) {
            Driven::Going => match pause(self.link, self.endpoint, ex, sink) {
                Ok(paused) => {
                    self.paused = Some(paused);
                    Driven::Going
                }
                Err(ended) => Driven::Over(ended),
            },
            over => over,
        }
    }

    /// Sends `req` and reads its response head: the body bytes that came with it, the
    /// exchange paused here while more come; a non-200 reply is the server's error.
    fn send(&mut self, req: &dyn StreamTarget, context: &Context) -> Result<Vec<u8>, Failed> {
        self.paused = None;
        self.link.check_idle(&mut self.talk);
        let mut head = Gather::new(MAX_ERROR_BODY);
        let now = self.link.now();
        let mut ex = req.exchange(&mut self.talk, now);
        let mut driven = self
            .link
            .drive(self.endpoint, &mut ex, &mut head, Until::Head);
        // An error reply is read whole (its body says why).
        if head.status != 200 && matches!(driven, Driven::Going) {
            driven = Driven::Over(finish(self.link, self.endpoint, &mut ex, &mut head));
        }
        let ended = match driven {
            Driven::Going => match pause(self.link, self.endpoint, ex, &mut head) {
                Ok(paused) => {
                    self.paused = Some(paused);
                    Ok(())
                }
                Err(ended) => ended,
            },
            Driven::Over(ended) => ended,
        };
        ended
            .and_then(|()| head.whole())
            .map_err(|e| Failed::of(context, e))?;
        if head.status != 200 {
            self.paused = None;
            let error = context.attach(CoreError::from_reply(head.status, &head.bytes));
            return Err(Failed::refused(head.status, error));
        }
        Ok(head.bytes)
    }

    /// Waits, as core's [`DataWait`] says, until benchmark `id` runs or ended (true) or
    /// failed (false: its stream is empty), from `known` if given, else from `/status`.
    fn wait_for_data(&mut self, id: u64, mut known: Option<StatusInfo>) -> Result<bool, Failed> {
        let mut wait = DataWait::new();
        loop {
            let status = match known.take() {
                Some(status) => status,
                None => self.status(id)?,
            };
            match wait.handle_status(self.link.now(), &status.status()) {
                DataStep::SendData => return Ok(true),
                DataStep::Empty => return Ok(false),
                DataStep::PollStatusAt(at) => {
                    std::thread::sleep(at.saturating_duration_since(self.link.now()));
                }
            }
        }
    }

    /// `/status` of `id`, on this conversation.
    fn status(&mut self, id: u64) -> Result<StatusInfo, Failed> {
        let req = request::Status { id };
        let context = self.status.clone().unwrap_or_else(Context::unnamed);
        let mut body = Gather::new(MAX_JSON_REPLY);
        self.link.check_idle(&mut self.talk);
        let now = self.link.now();
        let mut ex: Ex<'_, '_> = self.talk.exchange(&req, ResponseKind::Reply, now);
        let ended = match ex.outcome() {
            Some(Err(e)) => Err(self.link.failure(e)),
            _ => finish(self.link, self.endpoint, &mut ex, &mut body),
        };
        ended
            .and_then(|()| body.whole())
            .map_err(|e| Failed::of(&context, e))?;
        match request::Status::read_reply(body.status, &body.bytes) {
            Ok(reply) => Ok(StatusInfo::from(reply)),
            Err(e) => Err(Failed::refused(
                e.http_status().unwrap_or(200),
                context.attach(e),
            )),
        }
    }
}

impl Drop for Open<'_> {
    /// The next conversation goes on from here: a stream left before its end has its
    /// connection closed then (core's rule for a paused exchange's connection).
    fn drop(&mut self) {
        self.link.keep(&self.talk);
    }
}

/// How a stream resumes: its request, what was taken, the retry policy.
struct Resume<F: LineFormat> {
    request: Resend,
    cursor: Box<dyn StreamCursor<F> + Send>,
    /// Core's decisions around the requests (retrying off: [`BenchClient::with_retry`]).
    resumption: Resumption,
    resumed: u32,
    /// A silence past the idle limit ends the stream ([`LineStream::silence_ends`]).
    silence_ends: bool,
}

/// Lines of a log or metric stream as they arrive: owned, one at a time, through
/// [`Iterator`]; or borrowed, all that the connection has at once, through
/// [`LineStream::read_available`] (no allocation per line). A line that cannot be decoded
/// is an `Err` item and the stream goes on; a failed connection is a last `Err`.
///
/// A stream resumes by itself after a cut, a truncated body, a reset, a refused
/// connection, a 5xx or a silence past the idle limit, under the client's
/// [`Retry`] policy ([`BenchClient::with_retry`]): the server restreams from the
/// first line and the stream skips, per metric, what it already handed out (core's
/// [`resume`](benchlink_core::bench::resume) cursors), so no line is lost or repeated.
/// What cannot be resumed exactly (a benchmark restarted under the same id, a live
/// tail's gap) is an `Err` item, never a guess. [`resumptions`](LineStream::resumptions)
/// counts the times it resumed.
pub struct LineStream<'c, F: OwnedLine> {
    /// `None`: an empty stream (a failed benchmark's `/data`).
    open: Option<Open<'c>>,
    /// Body bytes that came with the head, not handed out yet.
    early: Vec<u8>,
    /// The last line was handed out.
    done: bool,
    lines: LineDecoder<'c, F>,
    pending: VecDeque<Result<F::Owned, Error>>,
    context: Context,
    resume: Resume<F>,
}

/// What [`LineStream::read_available`] ended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Available {
    /// Every line received so far was handed out and the connection has nothing more
    /// to read right now: the moment to flush output. More may come.
    Idle,
    /// The stream ended (its last line was handed out).
    End,
    /// The line callback asked to stop; the stream is closed.
    Stopped,
}

impl<F: OwnedLine> fmt::Debug for LineStream<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineStream")
            .field(
                "open",
                &self.open.as_ref().is_some_and(|o| o.paused.is_some()),
            )
            .field("resumed", &self.resume.resumed)
            .finish_non_exhaustive()
    }
}

/// A stream's body as lines, classified by its cursor, the new ones handed to `each`
/// until it breaks.
struct Lines<'s, 'l, F: LineFormat, E> {
    lines: &'s mut LineDecoder<'l, F>,
    cursor: &'s mut (dyn StreamCursor<F> + Send),
    resumption: &'s mut Resumption,
    each: E,
    stopped: bool,
}

impl<F, E> Lines<'_, '_, F, E>
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    /// The response ended normally: its last line, and whether it had every line taken
    /// before.
    fn end(&mut self) {
        let Lines {
            lines,
            cursor,
            resumption,
            each,
            stopped,
        } = self;
        if let Some(last) = lines.finish() {
            *stopped |= hand_out(&mut **cursor, last, each).is_break();
            if *stopped {
                return;
            }
        }
        resumption.end(&mut **cursor, each);
    }
}

/// `each` as a line callback (the closure's signature, for every line lifetime).
fn line_callback<F, E>(each: E) -> E
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    each
}

impl<F, E> Sink for Lines<'_, '_, F, E>
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    fn head(&mut self, _status: u16) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    fn data(&mut self, mut data: &[u8]) -> ControlFlow<()> {
        let Lines {
            lines,
            cursor,
            each,
            stopped,
            ..
        } = self;
        while let Some(line) = lines.next(&mut data) {
            *stopped |= hand_out(&mut **cursor, line, each).is_break();
            if *stopped {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

impl<'c, F: OwnedLine> LineStream<'c, F> {
    /// Sends the request the first time (a `/data` stream's caller waited for the
    /// benchmark already); a failure worth trying again is retried (not counted as a
    /// resumption: nothing was taken yet).
    fn start(&mut self) -> Result<(), Error> {
        match self.send(false) {
            Ok(()) => Ok(()),
            Err(failed) => self.retry(failed),
        }
    }

    /// Sends the stream's request (for `/data` with `wait`, once the benchmark runs: a
    /// failed one ends the stream).
    fn send(&mut self, wait: bool) -> Result<(), Failed> {
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        if let (Resend::Data(id), true) = (&self.resume.request, wait) {
            if !open.wait_for_data(*id, None)? {
                self.open = None;
                return Ok(());
            }
        }
        let context = &self.context;
        self.early = self.resume.request.with(|req| open.send(req, context))?;
        Ok(())
    }

    /// After `failed`: waits as the policy says and sends the request again, until it
    /// streams or the failure is final.
    fn retry(&mut self, mut failed: Failed) -> Result<(), Error> {
        loop {
            let at = self.try_again_at(&failed).ok_or(failed.error)?;
            self.sleep_until(at);
            match self.send(true) {
                Ok(()) => return Ok(()),
                Err(again) => failed = again,
            }
        }
    }

    /// When to try again after `failed`, as core's [`Resumption`] says.
    fn try_again_at(&mut self, failed: &Failed) -> Option<CoreInstant> {
        let open = self.open.as_ref()?;
        if open.link.reached() {
            self.resume.resumption.reached();
        }
        let now = open.link.now();
        let cursor = &mut *self.resume.cursor;
        self.resume.resumption.failed(cursor, now, failed.fault)
    }

    fn sleep_until(&self, at: CoreInstant) {
        if let Some(open) = self.open.as_ref() {
            std::thread::sleep(at.saturating_duration_since(open.link.now()));
        }
    }

    /// The response failed with `e` after it began: resumed from where the stream was
    /// (a live tail's gap reported to `each` first: `Break` when `each` stopped there),
    /// or the error.
    fn resume_after<E>(&mut self, e: Failure, each: &mut E) -> Result<ControlFlow<()>, Error>
    where
        E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    {
        let silent = matches!(
            e,
            ClientError::Timeout {
                waiting: Waiting::StreamData,
                ..
            }
        );
        let mut failed = Failed::of(&self.context, e);
        if silent && self.resume.silence_ends {
            failed.fault = Fault::Final;
        }
        // Progress since the last request counts before the new one begins.
        let at = self.try_again_at(&failed).ok_or(failed.error)?;
        // The partial line of the failed response goes with it; it comes again whole.
        let _ = self.lines.finish();
        self.early.clear();
        let cursor = &mut *self.resume.cursor;
        if self.resume.resumption.begin(cursor, each).is_break() {
            return Ok(ControlFlow::Break(()));
        }
        self.sleep_until(at);
        if let Err(again) = self.send(true) {
            self.retry(again)?;
        }
        self.resume.resumed += 1;
        Ok(ControlFlow::Continue(()))
    }

    /// Makes a silence past the idle limit
    /// ([`with_stream_idle_timeout`](BenchClient::with_stream_idle_timeout)) end the
    /// stream with its timeout error instead of resuming it: for a caller that reads a
    /// running benchmark's samples up to now and takes a quiet stream as caught up
    /// (`benchlink bench plot`). Cuts are still resumed.
    ///
    /// ```no_run
    /// let mut client = benchlink_std::bench::BenchClient::from_env()?
    ///     .with_stream_idle_timeout(Some(std::time::Duration::from_secs(3)));
    /// let so_far: Vec<_> = client.data(7)?.silence_ends().map_while(Result::ok).collect();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn silence_ends(mut self) -> Self {
        self.resume.silence_ends = true;
        self
    }

    /// Times the stream was cut and resumed.
    ///
    /// ```no_run
    /// let mut client = benchlink_std::bench::BenchClient::from_env()?;
    /// let mut data = client.data(7)?;
    /// let samples = data.by_ref().filter(Result::is_ok).count();
    /// println!("{samples} samples, /data resumed {} times", data.resumptions());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resumptions(&self) -> u32 {
        self.resume.resumed
    }

    /// Reads as far as `until` into `sink`, resuming after a failure: Going, or the end
    /// (the stream's error when it could not be resumed).
    fn read<E>(&mut self, each: &mut E, until: Until) -> Result<Driven, Error>
    where
        E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    {
        loop {
            let mut sink = Lines {
                lines: &mut self.lines,
                cursor: &mut *self.resume.cursor,
                resumption: &mut self.resume.resumption,
                each: &mut *each,
                stopped: false,
            };
            // Body bytes that came with the head are this read's first bytes.
            let early = std::mem::take(&mut self.early);
            let until = match until {
                _ if early.is_empty() => until,
                Until::Read => {
                    let _ = sink.data(&early);
                    return Ok(Driven::Going);
                }
                _ => {
                    let _ = sink.data(&early);
                    Until::Drained { waited: true }
                }
            };
            if sink.stopped {
                return Ok(Driven::Over(Ok(())));
            }
            let driven = match self.open.as_mut() {
                Some(open) => open.drive(&mut sink, until),
                None => Driven::Over(Ok(())),
            };
            if sink.stopped {
                return Ok(Driven::Over(Ok(())));
            }
            match driven {
                Driven::Going => return Ok(Driven::Going),
                Driven::Over(Ok(())) => {
                    sink.end();
                    return Ok(Driven::Over(Ok(())));
                }
                Driven::Over(Err(e)) => {
                    if self.resume_after(e, each)?.is_break() {
                        return Ok(Driven::Over(Ok(())));
                    }
                }
            }
        }
    }

    /// Waits (up to the stream's idle limit) until lines arrive, then hands `each` every
    /// line the connection delivers without waiting again, borrowed from the receive
    /// buffers, and returns [`Available::Idle`] when the socket has nothing more to
    /// read right now; [`Available::End`] once the stream ended. Lines go out at the
    /// network's pace: when the server is slow each comes as soon as it arrives, when
    /// it is fast they come in large batches with one return per batch.
    ///
    /// A line callback that returns `Break` closes the stream ([`Available::Stopped`]).
    /// Lines the iterator already decoded but did not return are not handed out here.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use benchlink_std::bench::{Available, BenchClient};
    /// let mut client = BenchClient::from_env()?;
    /// let mut data = client.data(7)?;
    /// let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    /// use std::io::Write;
    /// loop {
    ///     let state = data.read_available(|line| {
    ///         if let Ok(s) = line {
    ///             let _ = writeln!(out, "{},{},{}", s.name, s.timestamp, s.value);
    ///         }
    ///         ControlFlow::Continue(())
    ///     })?;
    ///     out.flush()?;
    ///     if state != Available::Idle {
    ///         break;
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_available(
        &mut self,
        mut each: impl for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    ) -> Result<Available, Error> {
        if self.done {
            return Ok(Available::End);
        }
        let mut stopped = false;
        let mut each = line_callback::<F, _>(|line| {
            let flow = each(line);
            stopped |= flow.is_break();
            flow
        });
        let driven = self.read(&mut each, Until::Drained { waited: false });
        match driven {
            Ok(Driven::Going) => Ok(Available::Idle),
            Ok(Driven::Over(_)) => {
                self.open = None;
                self.done = true;
                Ok(if stopped {
                    Available::Stopped
                } else {
                    Available::End
                })
            }
            Err(e) => {
                self.open = None;
                self.done = true;
                Err(e)
            }
        }
    }
}

impl<F: OwnedLine> Iterator for LineStream<'_, F> {
    type Item = Result<F::Owned, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            let mut pending = std::mem::take(&mut self.pending);
            let context = self.context.clone();
            let mut each = line_callback::<F, _>(|line| {
                pending.push_back(F::own(line).map_err(|e| context.attach(e)));
                ControlFlow::Continue(())
            });
            let driven = self.read(&mut each, Until::Read);
            self.pending = pending;
            match driven {
                Ok(Driven::Going) => {}
                Ok(Driven::Over(_)) => {
                    self.open = None;
                    self.done = true;
                }
                Err(e) => {
                    self.open = None;
                    self.done = true;
                    self.pending.push_back(Err(e));
                }
            }
        }
    }
}

/// How a stream's decoded lines become owned items.
pub trait OwnedLine: LineFormat {
    /// The owned item.
    type Owned;
    /// Converts one decoded line (or its error).
    fn own(line: Result<Self::Item<'_>, Self::Error<'_>>) -> Result<Self::Owned, Error>;
}

impl OwnedLine for LogLine {
    type Owned = String;

    /// Log text that is not UTF-8 is shown lossily rather than dropped.
    fn own(line: Result<&str, LogLineError<'_>>) -> Result<String, Error> {
        match line {
            Ok(text) => Ok(text.to_owned()),
            Err(LogLineError::NotUtf8 { line }) => Ok(String::from_utf8_lossy(line).into_owned()),
            Err(e) => Err(ErrorKind::Reply(e.to_string()).into()),
        }
    }
}

impl OwnedLine for MetricLine {
    type Owned = Sample;

    fn own(
        line: Result<benchlink_core::bench::Sample<'_>, benchlink_core::bench::SampleError>,
    ) -> Result<Sample, Error> {
        line.map(Sample::from)
            .map_err(|e| ErrorKind::Reply(e.to_string()).into())
    }
}
