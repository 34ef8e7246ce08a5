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

Slot::Slot(const Model& model, Engine& engine, int seq)
    : model_(model),
      tok_(model.tokenizer()),
      engine_(engine),
      seq_(seq),
      pooled_(size_t(model.config().n_embd)),
      counts_(size_t(model.config().n_vocab)),
      penalized_(size_t(model.config().n_vocab)) {
  seen_.reserve(size_t(engine.n_ctx()));
  text_.reserve(4096);
}

size_t Slot::common_prefix(const std::vector<int32_t>& prompt) const {
  const std::vector<int32_t>& cached = engine_.tokens(seq_);
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
  engine_.truncate(seq_, int64_t(keep));
  n_done_ = keep;
  result_.n_cached = int64_t(keep);
  std::fill(pooled_.begin(), pooled_.end(), 0.0);
  utf8_ = Utf8Stream();
  text_.clear();
  sent_ = 0;
  n_gen_ = 0;
  for (int32_t id : seen_) counts_[size_t(id)] = 0;
  seen_.clear();
  t_start_ = std::chrono::steady_clock::now();
  sampler_.reset();
  if (job_->kind != Job::Kind::Generate) return;
  try {
    sampler_.emplace(job_->params.sampler, int32_t(model_.config().n_vocab));
    for (int32_t t : job_->prompt) sampler_->accept(t);  // the repetition window sees the prompt
  } catch (const Error& e) {
    end(Finish::Error, e.what());  // the slot is free again at the end of the step
  }
}

bool Slot::next_entry(int64_t budget, Engine::Entry* e) {
  if (result_.finish != Finish::Running) return false;  // ended at start()
  if (job_->cancel.load()) {
    end(Finish::Cancelled);
    return false;
  }
  e->seq = seq_;
  if (in_prompt()) {
    e->tokens = job_->prompt.data() + n_done_;
    e->n = std::min<int64_t>(budget, int64_t(job_->prompt.size() - n_done_));
  } else {
    e->tokens = &next_token_;
    e->n = 1;
  }
  n_fed_ = e->n;
  return true;
}

void Slot::after_eval(int i) {
  try {
    if (!in_prompt()) return sample(engine_.logits(i));
    n_done_ += size_t(n_fed_);
    if (job_->kind == Job::Kind::Embed) {
      // Mean pooling of the final hidden states after the model's output norm (what the output matrix sees).
      const ModelConfig& c = model_.config();
      const float* w = model_.weights().output_norm.data();
      int64_t rows = 0;
      const float* h = engine_.hidden_states(i, &rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = h + r * c.n_embd;
        double ss = 0;
        for (int64_t k = 0; k < c.n_embd; ++k) ss += double(x[k]) * x[k];
        const double scale = 1.0 / std::sqrt(ss / double(c.n_embd) + double(c.rms_eps));
        for (int64_t k = 0; k < c.n_embd; ++k) pooled_[size_t(k)] += double(x[k]) * scale * w[k];
      }
    }
    if (in_prompt()) return;
    result_.prompt_ms = ms_since(t_start_);
    if (job_->kind == Job::Kind::Generate) return sample(engine_.logits(i));
    double norm = 0;
    for (double& v : pooled_) {
      v /= double(job_->prompt.size());
      norm += v * v;
    }
    norm = std::sqrt(norm);
    result_.embedding.resize(pooled_.size());
    for (size_t k = 0; k < pooled_.size(); ++k)
      result_.embedding[k] = float(norm > 0 ? pooled_[k] / norm : 0.0);
    end(Finish::Stop);
  } catch (const Error& e) {
    end(Finish::Error, e.what());
  }
}

void Slot::fail(const std::string& error) {
  end(Finish::Error, error);
}

bool Slot::take_result(JobResult* r) {
  if (!job_ || result_.finish == Finish::Running) return false;
  *r = result_;
  job_->finish(result_);
  job_.reset();
  return true;
}

const float* Slot::penalized_logits(const float* logits) {
  const GenParams& p = job_->params;
  if ((p.presence_penalty == 0 && p.frequency_penalty == 0) || seen_.empty()) return logits;
  std::copy(logits, logits + penalized_.size(), penalized_.begin());
  for (int32_t id : seen_) {
    penalized_[size_t(id)] -= p.presence_penalty + p.frequency_penalty * float(counts_[size_t(id)]);
  }
  return penalized_.data();
}

void Slot::sample(const float* logits) {
  if (n_gen_ == 0) t_first_ = std::chrono::steady_clock::now();
  Sampler& sampler = *sampler_;
  const int32_t id = sampler.sample(penalized_logits(logits));
  sampler.accept(id);
  if (tok_.is_eog(id) && !job_->params.ignore_eos) {
    text_ += utf8_.flush();
    return end(Finish::Stop);
  }
  ++n_gen_;
  if (counts_[size_t(id)]++ == 0) seen_.push_back(id);
  text_ += utf8_.push(tok_.token_to_piece(id));
  // The token is evaluated next step unless the budget or the context ends the reply here.
  const bool at_limit =
      n_gen_ >= job_->params.max_tokens || int64_t(engine_.tokens(seq_).size()) + 1 >= engine_.n_ctx();
  if (at_limit) text_ += utf8_.flush();
  emit(at_limit);
  if (result_.finish != Finish::Running) return;
  if (at_limit) return end(Finish::Length);
  next_token_ = id;
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
  const bool delivered = f == Finish::Stop || f == Finish::Length;
  if (job_->kind == Job::Kind::Generate && delivered && sent_ < text_.size()) {
    job_->append(text_.substr(sent_));  // text held back for a stop string that never came
    sent_ = text_.size();
  }
  result_.finish = f;
  result_.error = error;
  result_.n_gen = n_gen_;
  if (n_gen_ > 0) result_.gen_ms = ms_since(t_first_);
  if (in_prompt()) result_.prompt_ms = ms_since(t_start_);
}

}  // namespace tilellm::serve
