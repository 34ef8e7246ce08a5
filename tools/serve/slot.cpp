#include "slot.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tilellm::serve {
namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Bytes at the end of `text` that begin some stop string (and so may still turn into it).
size_t partial_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& s : stops) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > keep; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

Slot::Slot(const Model& model, const SessionOptions& opts)
    : model_(model),
      tok_(model.tokenizer()),
      session_(model, opts),
      pooled_(size_t(model.config().n_embd)),
      counts_(size_t(model.config().n_vocab)),
      penalized_(size_t(model.config().n_vocab)) {
  seen_.reserve(size_t(session_.n_ctx()));
  text_.reserve(4096);
}

size_t Slot::common_prefix(const std::vector<int32_t>& prompt) const {
  const std::vector<int32_t>& cached = session_.tokens();
  size_t n = 0;
  while (n < prompt.size() && n < cached.size() && prompt[n] == cached[n]) ++n;
  return n;
}

void Slot::start(std::shared_ptr<Job> job) {
  job_ = std::move(job);
  result_ = JobResult{};
  result_.n_prompt = int64_t(job_->prompt.size());
  // Embeddings pool the hidden states of every prompt token: nothing can be reused.
  size_t keep = job_->kind == Job::Kind::Embed ? 0 : common_prefix(job_->prompt);
  if (keep == job_->prompt.size()) --keep;  // the last prompt token is evaluated again for its logits
  session_.truncate(int64_t(keep));
  n_done_ = keep;
  result_.n_cached = int64_t(keep);
  std::fill(pooled_.begin(), pooled_.end(), 0.0);
  utf8_ = Utf8Stream();
  text_.clear();
  sent_ = 0;
  n_gen_ = 0;
  for (int32_t id : seen_) counts_[size_t(id)] = 0;
  seen_.clear();
  if (job_->sampler) {
    job_->sampler->reset();
    for (int32_t t : job_->prompt) job_->sampler->accept(t);  // the repetition window sees the prompt
  }
  t_start_ = std::chrono::steady_clock::now();
}

bool Slot::step(JobResult* done) {
  if (!job_) return false;
  try {
    if (job_->cancel.load()) {
      end(Finish::Cancelled);
    } else if (n_done_ < job_->prompt.size()) {
      prompt_step();
    } else {
      generate_step();
    }
  } catch (const Error& e) {
    end(Finish::Error, e.what());
  }
  if (result_.finish == Finish::Running) return false;
  *done = result_;
  job_->finish(result_);
  job_.reset();
  return true;
}

void Slot::prompt_step() {
  const size_t n = std::min(size_t(session_.n_batch()), job_->prompt.size() - n_done_);
  session_.eval(job_->prompt.data() + n_done_, int64_t(n));
  n_done_ += n;
  if (job_->kind == Job::Kind::Embed) {
    // Mean pooling of the final hidden states after the model's output norm (what the output matrix sees).
    const ModelConfig& c = model_.config();
    const float* w = model_.weights().output_norm.data();
    int64_t rows = 0;
    const float* h = session_.hidden_states(&rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = h + r * c.n_embd;
      double ss = 0;
      for (int64_t i = 0; i < c.n_embd; ++i) ss += double(x[i]) * x[i];
      const double scale = 1.0 / std::sqrt(ss / double(c.n_embd) + double(c.rms_eps));
      for (int64_t i = 0; i < c.n_embd; ++i) pooled_[size_t(i)] += double(x[i]) * scale * w[i];
    }
  }
  if (n_done_ < job_->prompt.size()) return;
  result_.prompt_ms = ms_since(t_start_);
  if (job_->kind != Job::Kind::Embed) return;
  double norm = 0;
  for (double& v : pooled_) {
    v /= double(job_->prompt.size());
    norm += v * v;
  }
  norm = std::sqrt(norm);
  result_.embedding.resize(pooled_.size());
  for (size_t i = 0; i < pooled_.size(); ++i)
    result_.embedding[i] = float(norm > 0 ? pooled_[i] / norm : 0.0);
  end(Finish::Stop);
}

const float* Slot::penalized_logits() {
  const float* logits = session_.logits();
  const GenParams& p = job_->params;
  if ((p.presence_penalty == 0 && p.frequency_penalty == 0) || seen_.empty()) return logits;
  std::copy(logits, logits + penalized_.size(), penalized_.begin());
  for (int32_t id : seen_) {
    penalized_[size_t(id)] -= p.presence_penalty + p.frequency_penalty * float(counts_[size_t(id)]);
  }
  return penalized_.data();
}

void Slot::generate_step() {
  if (n_gen_ == 0) t_first_ = std::chrono::steady_clock::now();
  Sampler& sampler = *job_->sampler;
  const int32_t id = sampler.sample(penalized_logits());
  sampler.accept(id);
  if (tok_.is_eog(id) && !job_->params.ignore_eos) {
    text_ += utf8_.flush();
    return end(Finish::Stop);
  }
  ++n_gen_;
  if (counts_[size_t(id)]++ == 0) seen_.push_back(id);
  text_ += utf8_.push(tok_.token_to_piece(id));
  const bool at_limit = n_gen_ >= job_->params.max_tokens || session_.n_past() + 1 >= session_.n_ctx();
  if (at_limit) text_ += utf8_.flush();
  emit(at_limit);
  if (result_.finish != Finish::Running) return;
  if (at_limit) return end(Finish::Length);
  session_.eval(&id, 1);
}

void Slot::emit(bool final) {
  const std::vector<std::string>& stops = job_->params.stop;
  // A stop string can only begin within the last (longest stop) bytes before what is new.
  size_t longest = 0;
  for (const std::string& s : stops) longest = std::max(longest, s.size());
  const size_t from = sent_ > longest ? sent_ - longest : 0;
  size_t cut = std::string::npos;
  for (const std::string& s : stops) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    if (cut > sent_) job_->append(text_.substr(sent_));
    sent_ = text_.size();
    return end(Finish::Stop);
  }
  const size_t upto = final ? text_.size() : text_.size() - partial_stop(text_, stops);
  if (upto > sent_) {
    job_->append(text_.substr(sent_, upto - sent_));
    sent_ = upto;
  }
}

void Slot::end(Finish f, const std::string& error) {
  if (job_->kind == Job::Kind::Generate && f != Finish::Error && f != Finish::Cancelled &&
      sent_ < text_.size()) {
    job_->append(text_.substr(sent_));  // text held back for a stop string that never came
    sent_ = text_.size();
  }
  result_.finish = f;
  result_.error = error;
  result_.n_gen = n_gen_;
  if (n_gen_ > 0) result_.gen_ms = ms_since(t_first_);
  if (n_done_ < job_->prompt.size() || result_.prompt_ms == 0) result_.prompt_ms = ms_since(t_start_);
}

}  // namespace tilellm::serve
